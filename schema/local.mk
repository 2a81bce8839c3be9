# SPDX-License-Identifier: MIT
# The generator turns the schema into C at build time (nothing generated is
# committed); a stamp keeps the five outputs in step.
SCHEMA_DIST = schema/session.schema schema/context.schema schema/queue.schema \
	schema/mem.schema schema/image.schema schema/program.schema schema/event.schema schema/notify.schema
SCHEMA_DIST += schema/area.schema schema/cmdbuf.schema
EXTRA_DIST += $(SCHEMA_DIST) schema/abi.lock schema/README.md tools/cmxgen.py
GEN_OUTPUTS = transport/proto.gen.h transport/proto.gen.c guest/stubs.gen.h \
	host/handlers.gen.h host/handlers.gen.c
BUILT_SOURCES += $(GEN_OUTPUTS)
CLEANFILES += $(GEN_OUTPUTS) schema.stamp

schema.stamp: $(addprefix $(top_srcdir)/,$(SCHEMA_DIST)) $(top_srcdir)/tools/cmxgen.py
	$(AM_V_GEN)mkdir -p transport guest host && $(PYTHON) $(top_srcdir)/tools/cmxgen.py \
	  --schema $(addprefix $(top_srcdir)/,$(SCHEMA_DIST)) \
	  --out-proto-h transport/proto.gen.h --out-proto-c transport/proto.gen.c \
	  --out-guest-h guest/stubs.gen.h --out-host-h host/handlers.gen.h \
	  --out-host-c host/handlers.gen.c && touch $@
$(GEN_OUTPUTS): schema.stamp
	@test -f $@ || { rm -f schema.stamp; $(MAKE) $(AM_MAKEFLAGS) schema.stamp; }

# Opcodes and layouts are append-only: see schema/README.md.
update-abi-lock:
	$(PYTHON) $(top_srcdir)/tools/cmxgen.py --schema $(addprefix $(top_srcdir)/,$(SCHEMA_DIST)) \
	  --lock $(top_srcdir)/schema/abi.lock --update-lock
.PHONY: update-abi-lock
