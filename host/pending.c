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

/* One entry per peer with pending connections; at most CMX_PENDING_MAX,
 * since each holds one at least. A linear scan: a thousand 16-byte
 * compares cost less than the accept they guard. Loop thread only. */
static struct {
	uint8_t key[16];
	unsigned n;
} peers[CMX_PENDING_MAX];
static unsigned npeers, total;
static uint64_t logged_ns;
static unsigned unlogged;

/* The peer's key; IPv6 addresses count per /64, which one host can fill. */
static void key_of(const struct cmx_peer *p, uint8_t key[16])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	cmx_peer_key(p, key);
	if (p->kind == CMX_PEER_TCP && memcmp(key, v4mapped, sizeof(v4mapped)))
		memset(key + 8, 0, 8);
}

static int find(const uint8_t key[16])
{
	for (unsigned i = 0; i < npeers; i++)
		if (!memcmp(peers[i].key, key, 16))
			return (int)i;
	return -1;
}

static void refused(const struct cmx_peer *p, unsigned mine)
{
	uint64_t now = cmx_now_ns();

	if (logged_ns && now - logged_ns < LOG_EVERY_NS) {
		unlogged++;
		return;
	}
	logged_ns = now;
	if (unlogged)
		cmx_warn("%s: refused: %u of its connections (%u in all) have not said Hello yet "
			 "(at most %u of one peer, %u in all); %u more refused since the last line",
			 p->name, mine, total, CMX_PENDING_PER_PEER, CMX_PENDING_MAX, unlogged);
	else
		cmx_warn("%s: refused: %u of its connections (%u in all) have not said Hello yet "
			 "(at most %u of one peer, %u in all)",
			 p->name, mine, total, CMX_PENDING_PER_PEER, CMX_PENDING_MAX);
	unlogged = 0;
}

int cmx_pending_enter(struct cmx_pending *pd, const struct cmx_peer *p)
{
	int i;

	key_of(p, pd->key);
	i = find(pd->key);
	if (total >= CMX_PENDING_MAX || (i >= 0 && peers[i].n >= CMX_PENDING_PER_PEER)) {
		refused(p, i >= 0 ? peers[i].n : 0);
		return -EAGAIN;
	}
	if (i < 0) {
		i = (int)npeers++;
		memcpy(peers[i].key, pd->key, 16);
		peers[i].n = 0;
	}
	peers[i].n++;
	total++;
	pd->in = 1;
	return 0;
}

void cmx_pending_leave(struct cmx_pending *pd)
{
	int i;

	if (!pd->in)
		return;
	pd->in = 0;
	i = find(pd->key);
	if (i < 0)
		return;
	total--;
	if (--peers[i].n == 0)
		peers[i] = peers[--npeers];
}

unsigned cmx_pending_count(void)
{
	return total;
}
