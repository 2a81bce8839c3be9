// SPDX-License-Identifier: MIT
// The CDI spec clmuxd keeps current where clmuxd.conf asks (cdi = PATH):
// tools/cdi.c's spec of this daemon's own listeners, in a child process.
#include "cdikeep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi.h"
#include "listener.h"
#include "log.h"
#include "server.h"

void cmx_cdikeep_write(struct cmx_server *srv, const char *when)
{
	static struct cmx_cdi_listener ls[CMX_CDI_MAX_LISTENERS];
	const char *out = srv->tenants.cdi;
	const char *icd =
	    srv->tenants.cdi_icd[0] ? srv->tenants.cdi_icd : CMX_LIBDIR "/libclmux.so";
	unsigned nls = 0;
	pid_t pid;
	int st;

	if (!out[0])
		return;
	for (unsigned i = 0; i < srv->nlisteners && nls < CMX_CDI_MAX_LISTENERS; i++) {
		const struct cmx_listener *l = &srv->listeners[i];
		if (l->addr.type != CMX_ADDR_UNIX)
			continue;
		snprintf(ls[nls].tenant, sizeof(ls[nls].tenant), "%s",
			 l->tenant[0] ? l->tenant : "-");
		ls[nls++].path = l->addr.path;
	}
	/*
	 * A child does it: finding the ICD's libraries loads the ICD (without
	 * calling it), which has no business in the daemon's own address
	 * space. The wait is short (a few files) and the loop has nothing
	 * else to do at start or in a reload.
	 */
	pid = fork();
	if (pid < 0) {
		cmx_err("cdi: %s: %s not written: fork: %s", when, out, strerror(errno));
		return;
	}
	if (!pid) {
		cmx_cdi_who = "clmuxd: cdi: ";
		/* Its "PATH: N devices" line goes to the log, as stderr does. */
		if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(1);
		_exit(cmx_cdi_write(ls, nls, out, icd, 0) ? 1 : 0);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && !WEXITSTATUS(st))
		cmx_info("cdi: %s: %s written", when, out);
	else
		cmx_err("cdi: %s: %s not written (the line above says why); the spec on disk "
			"stays as it was",
			when, out);
}
