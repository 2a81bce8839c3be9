// SPDX-License-Identifier: MIT
// Moving a tenant's sessions to another clmuxd at run time: the source
// writes them as state files and streams them to the destination's admin
// socket, which restores them and waits for the guests to resume.
#ifndef CMX_HOST_MIGRATE_H
#define CMX_HOST_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

struct cmx_server;
struct cmx_tenant;
struct cmx_text;

/* The admin request that carries state files: this line, then the files
 * back to back until the sender shuts its side down. */
#define CMX_MIGRATE_REQUEST "state-in"

struct cmx_migrate_stats {
	unsigned sessions;
	uint64_t bytes; /* state file bytes sent */
	uint64_t ns;	/* from the first session's drain to the last connection's end */
	char why[128];	/* an error's cause */
};

/* A connection to the destination's admin socket, "unix:PATH" or PATH:
 * an fd or -errno. */
int cmx_migrate_connect(const char *dest);

/* Source: every connected session of t written, sent through fd (which
 * this consumes) and, once the destination said it has them all, its
 * connection ended so that its guest resumes there; then done(arg, err,
 * st), err 0 or -errno with st->why. It starts once every session of t
 * is between two calls (waiting up to a few seconds), and from there holds the
 * loop thread to the end: no call of these sessions is applied after its
 * state is written. On an error the sessions stay here, untouched. 0, or
 * -ENOMEM (done not called). */
int cmx_migrate_out(struct cmx_server *srv, struct cmx_tenant *t, int fd,
		    void (*done)(void *arg, int err, const struct cmx_migrate_stats *st),
		    void *arg);

/* A destination's migrations in (srv->migrate_in). Loop thread. */
struct cmx_migrate_wait;
struct cmx_migrate_in {
	/* Those whose sessions are being restored, to answer once they are
	 * (host/migrate.c). */
	struct cmx_migrate_wait *waits;
	/* The files taken in, for their names; with workers, the
	 * CMX_CTL_RESTORE requests, for their answers. */
	unsigned serial;
	uint64_t seqs;
};

/* Destination: the admin request CMX_MIGRATE_REQUEST on fd, whose next
 * nfirst bytes were read already into first. Each file is checked whole,
 * kept in the state directory and restored (by the tenant's worker when
 * there are workers); the answer goes to out once every session is
 * restored: 1, and answered(arg) runs then; 0 when out has it now. */
int cmx_migrate_in(struct cmx_server *srv, int fd, const uint8_t *first, size_t nfirst,
		   struct cmx_text *out, void (*answered)(void *arg), void *arg);
/* Front end: a worker's answer to CMX_CTL_RESTORE of that seq. */
void cmx_migrate_in_restored(struct cmx_server *srv, uint64_t seq, int err);
/* Worker: done(arg, err) once session id, being restored here, waits for
 * its guest (0), or its restore failed (-errno). */
void cmx_migrate_session_restored(struct cmx_server *srv, uint64_t id,
				  void (*done)(void *arg, int err), void *arg);

#endif
