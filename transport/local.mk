# SPDX-License-Identifier: MIT
noinst_LTLIBRARIES += transport/libcmxtransport.la
transport_libcmxtransport_la_SOURCES = transport/wire.h transport/piece.h transport/log.h transport/log.c \
	transport/codec.h transport/codec.c transport/buf.h transport/buf.c \
	transport/addr.h transport/addr.c transport/frame.h transport/frame.c transport/area_layout.h transport/ivshmem_layout.h \
	transport/ring.h transport/ring.c transport/compress.h transport/compress.c \
	transport/mayprint.h transport/clcheck.h transport/fdio.h \
	transport/virtq.h transport/virtq.c transport/vsock_dev.h transport/vsock_dev.c \
	transport/vhost_user.h transport/vhost_user.c
nodist_transport_libcmxtransport_la_SOURCES = transport/proto.gen.h transport/proto.gen.c
transport_libcmxtransport_la_CFLAGS = $(AM_CFLAGS) -fPIC $(LZ4_CFLAGS)
transport_libcmxtransport_la_LIBADD = $(LZ4_LIBS)

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

check_PROGRAMS += transport/tests/test_compress
TESTS += transport/tests/test_compress
transport_tests_test_compress_SOURCES = transport/tests/test_compress.c
transport_tests_test_compress_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_compress_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)
endif

if HAVE_CHECK
check_PROGRAMS += transport/tests/test_ring
TESTS += transport/tests/test_ring
transport_tests_test_ring_SOURCES = transport/tests/test_ring.c
transport_tests_test_ring_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_ring_LDADD = transport/libcmxtransport.la $(CHECK_LIBS) -lpthread
# The vhost-user-vsock device's pieces, each against a stand-in guest.
VQ_TESTS = transport/tests/test_virtq transport/tests/test_vsock_dev transport/tests/test_vhost_user
check_PROGRAMS += $(VQ_TESTS)
TESTS += $(VQ_TESTS)
EXTRA_DIST += transport/tests/vq_driver.h transport/tests/vhu_frontend.h
transport_tests_test_virtq_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_virtq_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)
transport_tests_test_vsock_dev_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_vsock_dev_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)
transport_tests_test_vhost_user_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
transport_tests_test_vhost_user_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)
endif
