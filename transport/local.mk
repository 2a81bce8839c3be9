# SPDX-License-Identifier: MIT
noinst_LTLIBRARIES += transport/libcmxtransport.la
transport_libcmxtransport_la_SOURCES = transport/wire.h transport/log.h transport/log.c \
	transport/codec.h transport/codec.c transport/buf.h transport/buf.c \
	transport/addr.h transport/addr.c transport/frame.h transport/frame.c
nodist_transport_libcmxtransport_la_SOURCES = transport/proto.gen.h transport/proto.gen.c
transport_libcmxtransport_la_CFLAGS = $(AM_CFLAGS) -fPIC

if HAVE_CHECK
check_PROGRAMS += transport/tests/test_codec
TESTS += transport/tests/test_codec
transport_tests_test_codec_SOURCES = transport/tests/test_codec.c
transport_tests_test_codec_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_codec_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)

check_PROGRAMS += transport/tests/test_addr
TESTS += transport/tests/test_addr
transport_tests_test_addr_SOURCES = transport/tests/test_addr.c
transport_tests_test_addr_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_addr_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)
endif
