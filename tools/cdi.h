// SPDX-License-Identifier: MIT
// The CDI spec of clmuxd's tenants (tools/cdi.c), and clmuxctl's cdi command.
#ifndef CMX_TOOLS_CDI_H
#define CMX_TOOLS_CDI_H

#define CMX_CDI_DEFAULT	      "/var/run/cdi/clmux.json"
#define CMX_CDI_MAX_LISTENERS 1024

/* One unix listener of the daemon, a tenant's ("-": none) or not: each
 * tenant's first makes a device, and every one may share a directory only
 * with its own tenant's. */
struct cmx_cdi_listener {
	char tenant[128];
	const char *path;
};

/* What begins each line the spec's code says on standard error. */
extern const char *cmx_cdi_who;

/* The spec of these listeners (at most CMX_CDI_MAX_LISTENERS) and the ICD
 * at icd, written to out by a temporary file and rename (its vendors file
 * beside it), or, where list is set, its devices printed. 0, or 1 after
 * saying why with nothing written. */
int cmx_cdi_write(const struct cmx_cdi_listener *ls, unsigned nls, const char *out, const char *icd,
		  int list);

/* The admin socket's answer to one request line (without its newline):
 * 0 with the text after "ok" in *answer (malloc'd), or 1 after saying why
 * on standard error. In tools/clmuxctl.c. */
int cmx_ctl_ask(const char *admin, const char *req, char **answer);

/* clmuxctl cdi generate|list ...: argv[0] is "cdi". An exit status. In
 * tools/cdictl.c. */
int cmx_cdi_main(const char *admin, int json, int argc, char **argv);

#endif
