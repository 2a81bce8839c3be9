// SPDX-License-Identifier: MIT
// Tenant tokens and the limit on failed attempts (host/auth.h).
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#define LIMIT_SLOTS 256 /* sources tracked at once */
#define LIMIT_PROBE 8

struct token {
	char tenant[CMX_TENANT_MAX];
	size_t len;
	uint8_t bytes[CMX_TOKEN_MAX]; /* zero padded: compared whole */
};

struct limit {
	uint8_t key[16];
	uint64_t until; /* ms when the bucket is empty again; 0: free slot */
	int full;	/* reached the burst: refused until empty */
};

struct cmx_auth {
	struct token *tokens;
	size_t ntokens, cap;
	struct limit limits[LIMIT_SLOTS];
};

int cmx_auth_create(struct cmx_auth **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void cmx_auth_destroy(struct cmx_auth *a)
{
	if (!a)
		return;
	/* Tokens are secrets: do not leave them in freed memory. */
	if (a->tokens)
		explicit_bzero(a->tokens, a->cap * sizeof(*a->tokens));
	free(a->tokens);
	free(a);
}

/* Equal or not, in time independent of where they differ: the whole
 * zero-padded array is compared, with OpenSSL's constant-time compare. */
static int token_eq(const struct token *t, const uint8_t *pad, size_t len)
{
	return (t->len == len) & (CRYPTO_memcmp(t->bytes, pad, CMX_TOKEN_MAX) == 0);
}

int cmx_auth_check(const struct cmx_auth *a, const void *token, size_t len,
		   char tenant[CMX_TENANT_MAX])
{
	uint8_t pad[CMX_TOKEN_MAX] = { 0 };
	const struct token *hit = NULL;

	if (len > CMX_TOKEN_MAX || !len)
		return -EACCES;
	memcpy(pad, token, len);
	/* Every token is compared, whichever matches. */
	for (size_t i = 0; i < a->ntokens; i++)
		if (token_eq(&a->tokens[i], pad, len))
			hit = &a->tokens[i];
	explicit_bzero(pad, sizeof(pad));
	if (!hit)
		return -EACCES;
	memcpy(tenant, hit->tenant, CMX_TENANT_MAX);
	return 0;
}

static int tenant_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= CMX_TENANT_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(name[i] >= 'a' && name[i] <= 'z') && !(name[i] >= 'A' && name[i] <= 'Z') &&
		    !(name[i] >= '0' && name[i] <= '9') && !strchr("-_.", name[i]))
			return 0;
	return 1;
}

int cmx_auth_add(struct cmx_auth *a, const char *tenant, const void *token, size_t len)
{
	char who[CMX_TENANT_MAX];
	struct token *t;

	if (!tenant_ok(tenant) || len < CMX_TOKEN_MIN || len > CMX_TOKEN_MAX)
		return -EINVAL;
	if (!cmx_auth_check(a, token, len, who))
		return -EEXIST;
	if (a->ntokens == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 8;
		struct token *n = calloc(cap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		if (a->tokens) {
			memcpy(n, a->tokens, a->ntokens * sizeof(*n));
			explicit_bzero(a->tokens, a->cap * sizeof(*a->tokens));
			free(a->tokens);
		}
		a->tokens = n;
		a->cap = cap;
	}
	t = &a->tokens[a->ntokens++];
	memset(t, 0, sizeof(*t));
	strcpy(t->tenant, tenant);
	memcpy(t->bytes, token, len);
	t->len = len;
	return 0;
}

int cmx_auth_load(struct cmx_auth *a, const char *path, char *err, size_t errlen)
{
	char line[512];
	struct stat st;
	unsigned lineno = 0;
	int fd, e = 0;
	FILE *f;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		e = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IROTH | S_IWOTH))) {
		snprintf(err, errlen, "%s: %s; chmod o-rw it", path,
			 S_ISREG(st.st_mode) ? "readable or writable by others" : "not a regular file");
		close(fd);
		return -EPERM;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (!e && fgets(line, sizeof(line), f)) {
		char *save, *tenant, *token, *extra;

		lineno++;
		line[strcspn(line, "#\r\n")] = '\0';
		tenant = strtok_r(line, " \t", &save);
		if (!tenant)
			continue;
		token = strtok_r(NULL, " \t", &save);
		extra = token ? strtok_r(NULL, " \t", &save) : NULL;
		if (!token || extra)
			e = -EINVAL;
		else
			e = cmx_auth_add(a, tenant, token, strlen(token));
		if (e)
			snprintf(err, errlen, "%s:%u: %s", path, lineno,
				 e == -EEXIST ? "a token held by another line"
				 : e == -ENOMEM ? "out of memory"
				 : "expected 'TENANT TOKEN' (tenant: letters, digits, -_.; "
				   "token: 16 to 256 characters)");
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	return e;
}

/* The slot holding key, else a free or the least recent one to reuse. */
static struct limit *limit_slot(struct cmx_auth *a, const uint8_t key[16], uint64_t now, int add)
{
	uint32_t h = 2166136261u;
	struct limit *victim = NULL;

	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 16777619u;
	for (int i = 0; i < LIMIT_PROBE; i++) {
		struct limit *l = &a->limits[(h + (uint32_t)i) % LIMIT_SLOTS];
		if (l->until > now && !memcmp(l->key, key, 16))
			return l;
		if (!victim || l->until < victim->until)
			victim = l;
	}
	if (!add)
		return NULL;
	memcpy(victim->key, key, 16);
	victim->until = now;
	victim->full = 0;
	return victim;
}

int cmx_auth_allowed(struct cmx_auth *a, const uint8_t key[16], uint64_t now_ms)
{
	struct limit *l = limit_slot(a, key, now_ms, 0);

	return l && l->full ? -EAGAIN : 0;
}

int cmx_auth_failed(struct cmx_auth *a, const uint8_t key[16], uint64_t now_ms)
{
	struct limit *l = limit_slot(a, key, now_ms, 1);

	l->until += CMX_AUTH_DRAIN_MS;
	if (l->until - now_ms >= (uint64_t)CMX_AUTH_BURST * CMX_AUTH_DRAIN_MS)
		l->full = 1;
	return l->full;
}
