// SPDX-License-Identifier: MIT
// clmuxctl cdi: a Container Device Interface spec of clmuxd's tenants.
#ifndef CMX_TOOLS_CDI_H
#define CMX_TOOLS_CDI_H

/* The admin socket's answer to one request line (without its newline):
 * 0 with the text after "ok" in *answer (malloc'd), or 1 after saying why
 * on standard error. In tools/clmuxctl.c. */
int cmx_ctl_ask(const char *admin, const char *req, char **answer);

/* clmuxctl cdi generate|list ...: argv[0] is "cdi". An exit status. */
int cmx_cdi_main(const char *admin, int json, int argc, char **argv);

#endif
