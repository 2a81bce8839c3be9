// SPDX-License-Identifier: MIT
// Pending connections: a table of peers with connections that have not said
// Hello, so that strangers cannot hold the daemon's descriptors and memory.
#include "pending.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "tenant.h"

/* At most one refusal line a second; the next one says how many it left out. */
#define LOG_EVERY_NS 1000000000ull

/* The peer's key; IPv6 addresses count per /64, which one host can fill. */
static void key_of(const struct cmx_peer *p, uint8_t key[16])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	cmx_peer_key(p, key);
	if (p->kind == CMX_PEER_TCP && memcmp(key, v4mapped, sizeof(v4mapped)))
		memset(key + 8, 0, 8);
}

static int find(const struct cmx_pending_peers *pp, const uint8_t key[16])
{
	for (unsigned i = 0; i < pp->npeers; i++)
		if (!memcmp(pp->peers[i].key, key, 16))
			return (int)i;
	return -1;
}

static void refused(struct cmx_pending_peers *pp, const struct cmx_peer *p, unsigned mine)
{
	uint64_t now = cmx_now_ns();

	if (pp->logged_ns && now - pp->logged_ns < LOG_EVERY_NS) {
		pp->unlogged++;
		return;
	}
	pp->logged_ns = now;
	if (pp->unlogged)
		cmx_warn("%s: refused: %u of its connections (%u in all) have not said Hello yet "
			 "(at most %u of one peer, %u in all); %u more refused since the last line",
			 p->name, mine, pp->total, CMX_PENDING_PER_PEER, CMX_PENDING_MAX,
			 pp->unlogged);
	else
		cmx_warn("%s: refused: %u of its connections (%u in all) have not said Hello yet "
			 "(at most %u of one peer, %u in all)",
			 p->name, mine, pp->total, CMX_PENDING_PER_PEER, CMX_PENDING_MAX);
	pp->unlogged = 0;
}

int cmx_pending_enter(struct cmx_pending_peers *pp, struct cmx_pending *pd,
		      const struct cmx_peer *p)
{
	int i;

	key_of(p, pd->key);
	i = find(pp, pd->key);
	if (pp->total >= CMX_PENDING_MAX || (i >= 0 && pp->peers[i].n >= CMX_PENDING_PER_PEER)) {
		refused(pp, p, i >= 0 ? pp->peers[i].n : 0);
		return -EAGAIN;
	}
	if (i < 0) {
		i = (int)pp->npeers++;
		memcpy(pp->peers[i].key, pd->key, 16);
		pp->peers[i].n = 0;
	}
	pp->peers[i].n++;
	pp->total++;
	pd->in = pp;
	return 0;
}

void cmx_pending_leave(struct cmx_pending *pd)
{
	struct cmx_pending_peers *pp = pd->in;
	int i;

	if (!pp)
		return;
	pd->in = NULL;
	i = find(pp, pd->key);
	if (i < 0)
		return;
	pp->total--;
	if (--pp->peers[i].n == 0)
		pp->peers[i] = pp->peers[--pp->npeers];
}
