// SPDX-License-Identifier: MIT
// --user NAME: once every socket, device file and region is open, the
// daemon gives up root for good and keeps NAME's groups (the GPU's).
#define _GNU_SOURCE
#include "privilege.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int cmx_privilege_drop(const char *user, char *err, size_t errlen)
{
	struct passwd pw, *p = NULL;
	char buf[4096];
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;
	int e;

	e = getpwnam_r(user, &pw, buf, sizeof(buf), &p);
	if (e || !p) {
		snprintf(err, errlen, "--user %s: %s", user, e ? strerror(e) : "no such user");
		return e ? -e : -ENOENT;
	}
	if (p->pw_uid == 0) {
		snprintf(err, errlen, "--user %s: that is root", user);
		return -EINVAL;
	}
	/* Groups first, while we may still set them: NAME's supplementary
	 * groups (video, render: the GPU's device nodes), then its group, then
	 * its uid, all three ids of each, so nothing can switch back. glibc
	 * applies each to every thread (the executor's, the driver's). */
	if (initgroups(p->pw_name, p->pw_gid) || setresgid(p->pw_gid, p->pw_gid, p->pw_gid) ||
	    setresuid(p->pw_uid, p->pw_uid, p->pw_uid)) {
		e = -errno;
		snprintf(err, errlen, "--user %s: %s (clmuxd must start as root to change user)",
			 user, strerror(errno));
		return e;
	}
	if (getresuid(&ruid, &euid, &suid) || getresgid(&rgid, &egid, &sgid) || ruid != p->pw_uid ||
	    euid != p->pw_uid || suid != p->pw_uid || rgid != p->pw_gid || egid != p->pw_gid ||
	    sgid != p->pw_gid || setuid(0) == 0) {
		snprintf(err, errlen, "--user %s: the ids did not change for good", user);
		return -EPERM;
	}
	/* Nothing the daemon or a driver runs from now on gains privileges
	 * (setuid programs, file capabilities); workers inherit it. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		e = -errno;
		snprintf(err, errlen, "--user %s: no_new_privs: %s", user, strerror(errno));
		return e;
	}
	return 0;
}
