// SPDX-License-Identifier: MIT
// clmuxd's front end: listeners, tenants and the admin socket in a process
// that never calls OpenCL, and worker processes that run the tenants' calls.
#ifndef CMX_HOST_FRONT_H
#define CMX_HOST_FRONT_H

#include <stddef.h>
#include <stdint.h>

struct cmx_conn;
struct cmx_listener;
struct cmx_server;
struct cmx_tenant;
struct cmx_text;
struct json_object;

/* What every worker is started with (the daemon's own options). */
struct cmx_front_opts {
	const char *device;	/* --device, or NULL */
	const char *config;	/* the config file the tenants came from, or NULL */
	const char *user;	/* --user: workers drop to it too */
	const char *sandbox;	/* --sandbox, or NULL: the workers' config says */
	const char *state_dir;	/* --state-dir, or NULL */
	unsigned threads;
	uint64_t window_us;
	int profile;
};

/*
 * Assigns each listener and VM device to the worker that will serve it, and
 * starts those workers. A listener with tenant= belongs to that tenant's
 * worker, which accepts on it itself (TLS included); a TLS listener whose
 * tokens name the tenants is a worker of its own; any other listener stays
 * here, and each of its connections goes to its tenant's worker at Hello.
 * vspecs are the --listen vhost-user-vsock and ivshmem specs. The sockets
 * are listening when it returns; no worker runs yet. 0, or -errno (logged).
 */
int cmx_front_start(struct cmx_server *srv, const struct cmx_front_opts *o,
		    struct cmx_listener *ls, const char *const *lspecs, unsigned nls,
		    const char *const *vspecs, unsigned nvspecs);
/* Then starts the workers that serve listeners and VM devices, and the
 * default tenant's (or one), and waits until each has opened the device.
 * 0, or -errno (logged). */
int cmx_front_spawn(void);
/* With --state-dir, once it is open: starts the worker of each state file
 * whose worker is not running (a tenant's with no listener of its own),
 * so that its sessions are restored before their guests come back; logs
 * a file whose worker (a listener's or a VM device's) is not configured. */
void cmx_front_state_workers(void);
/* Asks every worker to write its sessions to the state directory (each
 * logs what it wrote); how many were asked. */
unsigned cmx_front_checkpoint(void);
struct cmx_migrate_stats;
/* Asks every worker to move tenant t's sessions to the daemon whose admin
 * socket is dest (host/migrate.c); done(arg, ...) runs once all have
 * answered, with their figures summed and the first error. 0, or -errno
 * (done not called). */
int cmx_front_migrate(struct cmx_tenant *t, const char *dest,
		      void (*done)(void *arg, int err, const struct cmx_migrate_stats *st),
		      void *arg);
/* A state file received for tenant t (session's): its running worker
 * restores it now and answers CMX_CTL_RESTORED with seq. 0 when asked,
 * -ESRCH when no worker of t runs (the one started later restores it). */
int cmx_front_restore(struct cmx_tenant *t, const char *name, uint64_t session, uint64_t seq);

/*
 * A connection of a front-end listener reached its Hello at `from` (n bytes
 * from there on are unparsed): it goes to its tenant's worker with those
 * bytes, and this process forgets it. 0 when handed over (the connection is
 * released here, not shut down), or -errno (the connection is refused).
 */
int cmx_front_handoff(struct cmx_conn *c, const uint8_t *from, size_t n);

/* Asks every worker for its tenants' usage and runs fn(arg) once all have
 * answered, or after a short wait (a worker stuck in the driver). */
void cmx_front_refresh(void (*fn)(void *), void *arg);
/* A worker ended (SIGCHLD): reaps every child that has. */
void cmx_front_reap(void);
/* clmuxctl: a tenant's quotas changed / evict it. Evict returns the number
 * of sessions it ended (as last reported). */
void cmx_front_quota(struct cmx_tenant *t);
unsigned cmx_front_evict(struct cmx_tenant *t);
/*
 * A VM device that appears after start (host/libvirt.c: a domain started):
 * spec (an ivshmem or vhost-user-vsock --listen spec naming t) is served by
 * t's worker from now on; fd, a listening socket the spec names (fd=) that
 * the worker inherits, or -1. That worker is started, or, running already
 * (a group's), replaced: its sessions end. 0, or -errno.
 */
int cmx_front_device_add(struct cmx_tenant *t, const char *spec, int fd);
/* The device is gone (its domain stopped): the worker that served it ends,
 * and is started again only for the listeners and devices it still has. */
void cmx_front_device_remove(const char *spec);
/* clmuxctl workers: each worker process, its state and its tenants, as
 * objects added to arr (json), or as a table in out where arr is NULL. */
void cmx_front_workers(struct json_object *arr, struct cmx_text *out);
/* SIGTERM: every worker is asked to stop, and killed after a grace time;
 * the loop stops once none is left. */
void cmx_front_drain(void);

#endif
