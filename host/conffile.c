// SPDX-License-Identifier: MIT
// clmuxd.conf: an INI-style file of sections and "key = value" lines.
//
// A parser of its own rather than a library's: libinih only reads, and
// GLib's GKeyFile, which keeps comments and saves atomically, takes only
// '#' comments (a ';' line is an error), keeps the last of repeated keys
// (uid =, gid = and cid = lines add up here) and writes the whole file
// back in its own layout. cmx_config_edit() rewrites only one tenant's
// quota lines and leaves every other byte, and cmx_config_save() renames
// a complete, synced temporary over the file.
#define _GNU_SOURCE
#include "conffile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"
#include "text.h"

#define MAX_CONFIG (1u << 20)

enum section { SEC_NONE, SEC_DAEMON, SEC_DEFAULTS, SEC_TENANT, SEC_OTHER };

/* One line split in place: a section header, or key and value, trimmed.
 * Returns 0 for a blank or comment line, 1 header, 2 key/value, -1 bad. */
static int split(char *line, char **a, char **b)
{
	char *p = line, *e;

	while (*p == ' ' || *p == '\t')
		p++;
	e = p + strlen(p);
	while (e > p && strchr(" \t\r\n", e[-1]))
		*--e = '\0';
	if (!*p || *p == '#' || *p == ';')
		return 0;
	if (*p == '[') {
		if (e[-1] != ']')
			return -1;
		e[-1] = '\0';
		*a = p + 1;
		return 1;
	}
	char *eq = strchr(p, '=');
	if (!eq)
		return -1;
	*b = eq + 1;
	while (**b == ' ' || **b == '\t')
		(*b)++;
	while (eq > p && (eq[-1] == ' ' || eq[-1] == '\t'))
		eq--;
	*eq = '\0';
	*a = p;
	return 2;
}

/* "tenant NAME" -> NAME, or NULL. */
static const char *tenant_section(char *hdr)
{
	if (strncmp(hdr, "tenant", 6) || (hdr[6] != ' ' && hdr[6] != '\t'))
		return NULL;
	hdr += 7;
	while (*hdr == ' ' || *hdr == '\t')
		hdr++;
	return hdr;
}

static int add_id(uint32_t *v, unsigned *n, const char *s)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(s, &end, 10);
	if (errno || end == s || *end || x > UINT32_MAX || *n == CMX_TENANT_MAX_IDS)
		return -EINVAL;
	v[(*n)++] = (uint32_t)x;
	return 0;
}

/* Pass 0 reads [clmuxd] and [defaults]; pass 1 the tenants, which start
 * from the defaults wherever their sections stand. */
static int parse_pass(char *text, struct cmx_tenants *ts, int pass, char *why, size_t whylen)
{
	enum section sec = SEC_NONE;
	struct cmx_tenant *t = NULL;
	unsigned lineno = 0;
	char *save = NULL, *line;
	char err[160];

	for (line = text; line; line = save) {
		char *a, *b;
		int kind;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		kind = split(line, &a, &b);
		if (kind < 0) {
			snprintf(why, whylen, "line %u: expected [section] or key = value", lineno);
			return -EINVAL;
		}
		if (kind == 1) {
			const char *name = tenant_section(a);
			t = NULL;
			if (!strcmp(a, "clmuxd")) {
				sec = SEC_DAEMON;
			} else if (!strcmp(a, "defaults")) {
				sec = SEC_DEFAULTS;
			} else if (name) {
				sec = SEC_TENANT;
				if (!cmx_tenant_name_ok(name)) {
					snprintf(why, whylen, "line %u: bad tenant name '%s'",
						 lineno, name);
					return -EINVAL;
				}
				if (pass == 1 && !(t = cmx_tenant_get(ts, name))) {
					snprintf(why, whylen, "line %u: out of memory", lineno);
					return -ENOMEM;
				}
			} else {
				snprintf(why, whylen, "line %u: unknown section [%s]", lineno, a);
				return -EINVAL;
			}
			continue;
		}
		if (kind == 0)
			continue;
		if (sec == SEC_NONE) {
			snprintf(why, whylen, "line %u: '%s' outside a section", lineno, a);
			return -EINVAL;
		}
		if (sec == SEC_DAEMON) {
			if (pass)
				continue;
			if (!strcmp(a, "default-tenant")) {
				if (!cmx_tenant_name_ok(b)) {
					snprintf(why, whylen, "line %u: bad tenant name '%s'",
						 lineno, b);
					return -EINVAL;
				}
				strcpy(ts->fallback, b);
				continue;
			}
			if (!strcmp(a, "libvirt") || !strcmp(a, "libvirt-group")) {
				int uri = !strcmp(a, "libvirt");
				char *to = uri ? ts->libvirt : ts->libvirt_group;
				size_t cap = uri ? sizeof(ts->libvirt) : sizeof(ts->libvirt_group);
				if (!*b || strlen(b) >= cap || strpbrk(b, " \t,")) {
					snprintf(why, whylen, "line %u: bad %s '%s'", lineno, a, b);
					return -EINVAL;
				}
				strcpy(to, b);
				continue;
			}
			if (!strcmp(a, "sandbox")) {
				int m = cmx_sandbox_parse(b);
				if (m < 0) {
					snprintf(why, whylen, "line %u: sandbox = on|off|log", lineno);
					return -EINVAL;
				}
				ts->sandbox = m + 1;
				continue;
			}
			int knob = cmx_tuning_set(&ts->tune, a, b, err, sizeof(err));
			if (knob < 0) {
				snprintf(why, whylen, "line %u: %s", lineno, err);
				return -EINVAL;
			}
			if (knob)
				continue;
			snprintf(why, whylen, "line %u: unknown key '%s' in [clmuxd]", lineno, a);
			return -EINVAL;
		}
		if (sec == SEC_DEFAULTS) {
			if (!pass && cmx_quota_set(&ts->defaults, a, b, err, sizeof(err))) {
				snprintf(why, whylen, "line %u: %s", lineno, err);
				return -EINVAL;
			}
			continue;
		}
		if (!pass)
			continue;
		if (!strcmp(a, "uid") || !strcmp(a, "gid") || !strcmp(a, "cid")) {
			int e = a[0] == 'u'   ? add_id(t->uids, &t->nuids, b)
				: a[0] == 'g' ? add_id(t->gids, &t->ngids, b)
					      : add_id(t->cids, &t->ncids, b);
			if (e) {
				snprintf(why, whylen, "line %u: bad %s '%s' (a number; at most %u)",
					 lineno, a, b, CMX_TENANT_MAX_IDS);
				return -EINVAL;
			}
		} else if (!strcmp(a, "context")) {
			if (strcmp(b, "shared") && strcmp(b, "own")) {
				snprintf(why, whylen, "line %u: context = shared or own, not '%s'",
					 lineno, b);
				return -EINVAL;
			}
			t->shared_context = !strcmp(b, "shared");
		} else if (!strcmp(a, "group")) {
			if (!cmx_tenant_name_ok(b)) {
				snprintf(why, whylen, "line %u: bad group name '%s'", lineno, b);
				return -EINVAL;
			}
			strcpy(t->group, b);
		} else if (cmx_quota_set(&t->q, a, b, err, sizeof(err))) {
			snprintf(why, whylen, "line %u: %s", lineno, err);
			return -EINVAL;
		}
	}
	return 0;
}

int cmx_config_parse(const char *text, struct cmx_tenants *ts, char *why, size_t whylen)
{
	cmx_tuning_defaults(&ts->tune);
	for (int pass = 0; pass < 2; pass++) {
		char *copy = strdup(text);
		int e;

		if (!copy)
			return -ENOMEM;
		e = parse_pass(copy, ts, pass, why, whylen);
		free(copy);
		if (e)
			return e;
	}
	return 0;
}

static char *read_all(const char *path, int *err)
{
	FILE *f = fopen(path, "re");
	char *text;
	size_t n;

	if (!f) {
		*err = -errno;
		return NULL;
	}
	text = malloc(MAX_CONFIG + 1);
	n = text ? fread(text, 1, MAX_CONFIG + 1, f) : 0;
	fclose(f);
	if (!text || n > MAX_CONFIG) {
		free(text);
		*err = text ? -EFBIG : -ENOMEM;
		return NULL;
	}
	text[n] = '\0';
	return text;
}

int cmx_config_load(const char *path, struct cmx_tenants *ts, char *why, size_t whylen)
{
	int e = 0;
	char *text = read_all(path, &e);

	if (!text) {
		snprintf(why, whylen, "%s", strerror(-e));
		return e;
	}
	e = cmx_config_parse(text, ts, why, whylen);
	free(text);
	return e;
}

static void put_quota_line(struct cmx_text *b, const struct cmx_quota *q, const char *key)
{
	char v[64];

	cmx_quota_format(q, key, v, sizeof(v));
	cmx_text_add(b, "%s = %s\n", key, v);
}

char *cmx_config_edit(const char *text, const char *tenant, const struct cmx_quota *q)
{
	struct cmx_text b = {0};
	int in_sec = 0, found = 0;
	unsigned done = 0; /* bit per quota key written */
	const char *line = text;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
		char *copy = strndup(line, n), *a, *v;
		int kind = copy ? split(copy, &a, &v) : -1;
		int keep = 1;

		if (kind == 1) {
			const char *name = tenant_section(a);
			if (in_sec) /* leaving it: add what it lacked */
				for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
					if (!(done & 1u << k))
						put_quota_line(&b, q, cmx_quota_keys[k].name);
			done = (1u << CMX_QUOTA_KEYS) - 1;
			in_sec = name && !strcmp(name, tenant);
			if (in_sec) {
				found = 1;
				done = 0;
			}
		} else if (kind == 2 && in_sec) {
			for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
				if (!strcmp(a, cmx_quota_keys[k].name)) {
					if (!(done & 1u << k))
						put_quota_line(&b, q, a);
					done |= 1u << k;
					keep = 0;
				}
		}
		if (keep) {
			cmx_text_put(&b, line, n);
			if (!nl)
				cmx_text_put(&b, "\n", 1);
		}
		free(copy);
		line += n;
	}
	if (in_sec)
		for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
			if (!(done & 1u << k))
				put_quota_line(&b, q, cmx_quota_keys[k].name);
	if (!found) {
		cmx_text_add(&b, "%s[tenant %s]\n", b.len ? "\n" : "", tenant);
		for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
			put_quota_line(&b, q, cmx_quota_keys[k].name);
	}
	cmx_text_put(&b, "", 0);
	if (b.oom) {
		cmx_text_fini(&b);
		return NULL;
	}
	return b.s;
}

int cmx_config_save(const char *path, const char *tenant, const struct cmx_quota *q)
{
	int e = 0;
	char *text = read_all(path, &e), *out, tmp[4096];
	struct stat st;
	int fd;
	size_t len;

	if (!text && e != -ENOENT)
		return e;
	out = cmx_config_edit(text ? text : "", tenant, q);
	free(text);
	if (!out)
		return -ENOMEM;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= sizeof(tmp)) {
		free(out);
		return -ENAMETOOLONG;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
		free(out);
		return e;
	}
	if (!stat(path, &st))
		fchmod(fd, st.st_mode & 07777);
	len = strlen(out);
	e = write(fd, out, len) == (ssize_t)len && !fsync(fd) ? 0 : -EIO;
	free(out);
	if (close(fd) && !e)
		e = -EIO;
	if (!e && rename(tmp, path))
		e = -errno;
	if (e)
		unlink(tmp);
	return e;
}
