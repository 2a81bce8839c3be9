// SPDX-License-Identifier: MIT
// Tenant tokens: a table of (tenant, token) that an Auth message is checked
// against, and a per-source-address limit on failed attempts.
#ifndef CMX_HOST_AUTH_H
#define CMX_HOST_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "peer.h"

#define CMX_TOKEN_MAX 256 /* bytes; the Auth schema's max= */
#define CMX_TOKEN_MIN 16  /* shorter tokens are refused when loaded */
/* Encoded arguments of an Auth message: its length and the padded token. */
#define CMX_AUTH_MSG_MAX (8 + CMX_TOKEN_MAX)

struct cmx_auth;

int cmx_auth_create(struct cmx_auth **out);
void cmx_auth_destroy(struct cmx_auth *a);

/* Adds the lines "TENANT TOKEN" of a file ('#' starts a comment). The file
 * must not be readable or writable by others. 0, or -errno with a reason in
 * err. The token never appears in err. */
int cmx_auth_load(struct cmx_auth *a, const char *path, char *err, size_t errlen);
/* Adds one tenant's token (the tenancy configuration feeds tokens here too).
 * 0, -EINVAL (bad name or length), -EEXIST (token already held), -ENOMEM. */
int cmx_auth_add(struct cmx_auth *a, const char *tenant, const void *token, size_t len);
/* Compares token with every token held, in time that depends only on the
 * number of tokens. 0 and the tenant's name copied, or -EACCES. */
int cmx_auth_check(const struct cmx_auth *a, const void *token, size_t len,
		   char tenant[CMX_TENANT_MAX]);

/* Failed attempts, per source (a 16-byte key from cmx_peer_key(): an IPv4
 * address, an IPv6 /64, a CID, a uid): a leaky bucket of CMX_AUTH_BURST failures that drains one
 * per CMX_AUTH_DRAIN_MS. Once full, the source is refused without a check until it has drained
 * completely (CMX_AUTH_BURST * CMX_AUTH_DRAIN_MS after the last failure). */
#define CMX_AUTH_BURST 5
#define CMX_AUTH_DRAIN_MS 1000
/* 0: may try; -EAGAIN: too many recent failures. */
int cmx_auth_allowed(struct cmx_auth *a, const uint8_t key[16], uint64_t now_ms);
/* Records a failure; returns 1 when it is the one that hits the limit. */
int cmx_auth_failed(struct cmx_auth *a, const uint8_t key[16], uint64_t now_ms);

#endif
