// SPDX-License-Identifier: MIT
// The root-only admin socket (clmuxctl) and the metrics endpoint.
#ifndef CMX_HOST_ADMIN_H
#define CMX_HOST_ADMIN_H

#include <stddef.h>

struct cmx_server;
struct cmx_text;
struct cmx_tenant;

#define CMX_ADMIN_DEFAULT "/run/clmux/admin.sock"

/* Listens on the Unix socket PATH (served on the loop): root's; with
 * PATH,group=NAME also NAME's members' (mode 0660). 0 or -errno. */
int cmx_admin_listen(struct cmx_server *srv, const char *spec);
/* Listens for metrics scrapes on "unix:PATH" or "tcp:HOST:PORT". 0, or
 * -errno with a reason in why. */
int cmx_metrics_listen(struct cmx_server *srv, const char *spec, char *why, size_t whylen);
/* Closes both (draining). */
void cmx_admin_close(struct cmx_server *srv);
/* Frees what the two left (srv->admin), once the loop is gone. */
void cmx_admin_destroy(struct cmx_server *srv);

/* One admin request line ("[json] tenants", "quota set T mem=1G", ...)
 * answered into out: "ok\n" then the body, or "error: reason\n". */
void cmx_admin_exec(struct cmx_server *srv, char *line, struct cmx_text *out);
/* Every tenant's counters in the Prometheus text format. */
void cmx_metrics_write(struct cmx_server *srv, struct cmx_text *out);

#endif
