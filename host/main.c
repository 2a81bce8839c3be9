// SPDX-License-Identifier: MIT
// clmuxd: serves one physical OpenCL device to guest sessions.
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addr.h"
#include "admin.h"
#include "buildcheck.h"
#include "cdikeep.h"
#include "checkpoint.h"
#include "conffile.h"
#include "defer.h"
#include "dispatch.h"
#include "conn.h"
#include "exec.h"
#include "executor.h"
#include "front.h"
#include "worker.h"
#include "kprintf.h"
#include "pinned.h"
#include "privilege.h"
#include "sandbox.h"
#include "listener.h"
#include "reaper.h"
#include "release.h"
#include "restore.h"
#include "log.h"
#include "scheduler.h"
#include "server.h"
#include "session.h"
#include "ivshmem.h"
#include "libvirt.h"
#include "notify.h"
#include "activation.h"
#include "vhost.h"

#define MAX_LISTEN 1024 /* one per tenant, bind-mounted into its container */
#define MAX_VHOST_SPECS 16

/*
 * The daemon as main() runs it: its server, the --listen addresses, and
 * what this file's signal and timer handlers hold. main() has the one;
 * every function here gets it passed, the handlers find it from their
 * cmx_io as every io of the loop finds its owner.
 */
struct daemon {
	struct cmx_server srv;
	struct cmx_listener listeners[MAX_LISTEN];
	const char *lspecs[MAX_LISTEN];
	unsigned nlisteners;
	int sig_fd;
	struct signalfd_siginfo sig_info;
	struct cmx_io sig_io, tick_io, flush_io, retire_io;
	unsigned drain_ticks; /* tick_done()'s while the device finishes */
	unsigned flush_ticks; /* flush_tick()'s */
	/* This process writes [clmuxd] cdi's spec (no worker does). */
	int keeps_cdi;
};

#define DAEMON_OF(io, field) ((struct daemon *)((char *)(io) - offsetof(struct daemon, field)))

/* The timers' period. A constant: not const only because
 * io_uring_prep_timeout() takes a pointer to non-const. */
static struct __kernel_timespec tick = { .tv_nsec = 20 * 1000 * 1000 };

/* While draining: exit once no session and no job is left, and the device
 * has finished what the scheduler let onto it (for at most 5 s: a command
 * stuck behind a user event nobody will set must not hold the exit). */
static void tick_done(struct cmx_io *io, int res, unsigned flags)
{
	struct daemon *d = DAEMON_OF(io, tick_io);
	struct cmx_server *srv = &d->srv;

	if (!srv->nsessions && !cmx_executor_busy(srv->exec) && !cmx_reap_busy() &&
	    (!cmx_sched_busy(srv) || ++d->drain_ticks > 250)) {
		cmx_loop_stop(srv->loop);
		return;
	}
	io_uring_prep_timeout(cmx_loop_sqe(srv->loop, &d->tick_io), &tick, 0, 0);
}

/* After a checkpoint the replies and notifications of what its drain
 * finished (a non-blocking read's data, an event's completion) go out
 * before the connections close, since the resumed session will not get
 * them again: the loop runs until no call is in flight and no output is
 * queued, for at most this many ticks (a guest that reads nothing). */
#define FLUSH_TICKS 500

static void close_all(struct daemon *d)
{
	/* Ending each call channel releases its session's objects. */
	while (d->srv.sessions) {
		struct cmx_session *s = d->srv.sessions;
		for (; s && s->closed; s = s->next)
			;
		if (!s)
			break;
		if (s->conn)
			cmx_conn_kill(s->conn, "daemon stopping");
		else
			cmx_release_session(s);
	}
	tick_done(&d->tick_io, 0, 0);
}

static int output_left(const struct cmx_server *srv)
{
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (!s->closed && (s->calls || (s->conn && cmx_conn_sending(s->conn)) ||
				   (s->nconn && cmx_conn_sending(s->nconn))))
			return 1;
	return 0;
}

static void flush_tick(struct cmx_io *io, int res, unsigned flags)
{
	struct daemon *d = DAEMON_OF(io, flush_io);

	if (output_left(&d->srv) && ++d->flush_ticks < FLUSH_TICKS) {
		io_uring_prep_timeout(cmx_loop_sqe(d->srv.loop, &d->flush_io), &tick, 0, 0);
		return;
	}
	close_all(d);
}

static void drain(struct daemon *d)
{
	struct cmx_server *srv = &d->srv;

	if (srv->front) {
		/* The workers drain their sessions; the front end ends with
		 * the last of them. */
		srv->draining = 1;
		cmx_admin_close(srv);
		for (unsigned i = 0; i < d->nlisteners; i++)
			cmx_listener_close(srv, &d->listeners[i]);
		cmx_front_drain();
		return;
	}
	srv->draining = 1;
	/* With --state-dir, the sessions are written down before they end,
	 * and take no more calls: one applied after would be lost. */
	if (cmx_checkpoint_enabled(srv)) {
		struct cmx_checkpoint_stats st;
		cmx_checkpoint_all(srv, &st);
		for (struct cmx_session *s = srv->sessions; s; s = s->next)
			if (!s->closed && s->conn)
				cmx_conn_drain(s->conn);
	}
	cmx_admin_close(srv);
	for (unsigned i = 0; i < d->nlisteners; i++)
		cmx_listener_close(srv, &d->listeners[i]);
	cmx_vhost_drain(srv);
	cmx_ivshmem_drain(srv);
	if (cmx_checkpoint_enabled(srv)) {
		d->flush_io.cb = flush_tick;
		flush_tick(&d->flush_io, 0, 0);
		return;
	}
	close_all(d);
}

/* SIGHUP: the configuration file again, as far as it changes live
 * (cmx_tenants_reload()); a file with an error changes nothing. Never an
 * end: a stray HUP must not drop every tenant's sessions. */
static void reload(struct daemon *d)
{
	struct cmx_server *srv = &d->srv;
	struct cmx_tenants nt = {0};
	const char *path = srv->config_path;
	char why[200];
	unsigned n;

	if (!path) {
		cmx_warn("SIGHUP: no configuration file to read again (--config, or %s)",
			 CMX_CONFIG_DEFAULT);
		return;
	}
	cmx_quota_unlimited(&nt.defaults);
	if (cmx_config_load(path, &nt, why, sizeof(why))) {
		cmx_err("SIGHUP: %s: %s; the running configuration stays", path, why);
		cmx_tenants_fini(&nt);
		return;
	}
	n = cmx_tenants_reload(&srv->tenants, &nt, srv->front ? cmx_front_quota : NULL);
	cmx_tenants_fini(&nt);
	cmx_info("SIGHUP: %s read again: %u change%s", path, n, n == 1 ? "" : "s");
	if (d->keeps_cdi)
		cmx_cdikeep_write(srv, "reload");
}

static void sig_done(struct cmx_io *io, int res, unsigned flags)
{
	struct daemon *d = DAEMON_OF(io, sig_io);
	const struct signalfd_siginfo *si = &d->sig_info;

	if (res == sizeof(*si) && si->ssi_signo == SIGCHLD) {
		cmx_front_reap();
	} else if (res == sizeof(*si) && si->ssi_signo == SIGHUP) {
		reload(d);
	} else if (res == sizeof(*si) && !d->srv.draining) {
		cmx_info("signal %u: draining and exiting", si->ssi_signo);
		cmx_notify("STOPPING=1");
		drain(d);
		if (!d->srv.front)
			return;
	}
	io_uring_prep_read(cmx_loop_sqe(d->srv.loop, &d->sig_io), d->sig_fd, &d->sig_info,
			   sizeof(d->sig_info), 0);
}

/*
 * Tenants: from the config file when there is one (--config, or the default
 * path if it exists); without one, every peer is tenant "default"'s, with
 * no limits, as before tenants existed. A listener's tenant=NAME that the
 * config does not define is created with the default quotas.
 */
static int tenants_setup(struct daemon *d, const char *config)
{
	struct cmx_server *srv = &d->srv;
	char why[200];

	srv->started_ns = cmx_now_ns();
	srv->listeners = d->listeners;
	srv->nlisteners = d->nlisteners;
	cmx_quota_unlimited(&srv->tenants.defaults);
	cmx_tuning_defaults(&srv->tenants.tune);
	if (config || !access(CMX_CONFIG_DEFAULT, F_OK)) {
		const char *path = config ? config : CMX_CONFIG_DEFAULT;
		if (cmx_config_load(path, &srv->tenants, why, sizeof(why))) {
			fprintf(stderr, "clmuxd: %s: %s\n", path, why);
			return -EINVAL;
		}
		srv->config_path = path;
	} else {
		strcpy(srv->tenants.fallback, "default");
		cmx_tenant_get(&srv->tenants, "default");
	}
	/* The knobs: the file's, then the environment's overrides; each
	 * checked here, once. */
	srv->tune = srv->tenants.tune;
	if (cmx_tuning_env(&srv->tune, why, sizeof(why))) {
		fprintf(stderr, "clmuxd: %s\n", why);
		return -EINVAL;
	}
	for (unsigned i = 0; i < d->nlisteners; i++) {
		struct cmx_listener *l = &d->listeners[i];
		int e = cmx_addr_opt(&l->addr, "tenant", l->tenant, sizeof(l->tenant));
		if (e == -ENOENT)
			continue;
		if (e || !cmx_tenant_get(&srv->tenants, l->tenant)) {
			fprintf(stderr, "clmuxd: --listen %s: bad tenant name\n", l->name);
			return -EINVAL;
		}
	}
	/* Tenants to be fair to: a config, several tenants, or tokens that
	 * name tenants. A daemon of one tenant pays no profiling. */
	srv->profile = srv->config_path || srv->tenants.count > 1;
	for (unsigned i = 0; i < d->nlisteners && !srv->profile; i++) {
		char v[8];
		srv->profile =
		    cmx_addr_opt(&d->listeners[i].addr, "tokens", v, sizeof(v)) != -ENOENT;
	}
	return 0;
}

/* The admin socket: asked for, or the default one when this daemon can have
 * it (root, no other daemon serving it). */
static void admin_setup(struct cmx_server *srv, const char *path)
{
	int e;

	if (path && !strcmp(path, "none"))
		return;
	if (!path) {
		path = CMX_ADMIN_DEFAULT;
		mkdir("/run/clmux", 0755);
	}
	e = cmx_admin_listen(srv, path);
	if (e)
		cmx_warn("no admin socket at %s: %s", path, strerror(-e));
	else
		cmx_info("admin socket %s (%s)", path,
			 strchr(path, ',') ? "root and the group" : "root only");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: clmuxd --listen ADDR [--listen ...] [--config FILE] [--admin PATH]\n"
		   "              [--metrics ADDR] [--device SPEC] [--threads N] [--user NAME]\n"
		   "              [--libvirt URI]\n"
		   "  --listen ADDR   where guests connect, one of\n"
		   "                    unix:PATH[,tokens=FILE]\n"
		   "                    vsock:PORT[,tokens=FILE]            (AF_VSOCK, any CID)\n"
		   "                    vsock-uds:UDS_PORT[,cid=N][,tokens=FILE]  (Firecracker,\n"
		   "                                      Cloud Hypervisor hybrid vsock)\n"
		   "                    tcp:ADDR:PORT,tokens=FILE          (IPv6: tcp:[ADDR]:PORT)\n"
		   "                    tcp:ADDR:PORT,tokens=FILE,tls=CERT:KEY  (TLS 1.3)\n"
		   "                    ivshmem:PATH,size=SIZE[,slots=N][,poll=US]  (QEMU ivshmem-plain)\n"
		   "                  each may end in ,tenant=NAME: every peer of it is NAME's;\n"
		   "                  a path takes ,mode=OCTAL,group=NAME (default: the umask's;\n"
		   "                  ivshmem 0600)\n"
		   "  --config FILE   tenants and quotas (default " CMX_CONFIG_DEFAULT " if present)\n"
		   "  --admin PATH[,group=NAME]  socket for clmuxctl (default " CMX_ADMIN_DEFAULT "):\n"
		   "                  root's, and NAME's members' with group=; 'none' serves none\n"
		   "  --metrics ADDR  Prometheus text on unix:PATH (0600) or tcp:127.0.0.1:PORT\n"
		   "                  (another address only with ,public; default off)\n"
		   "  --sched-window US  device time let onto the device at once (default 2000)\n"
		   "  --device SPEC   gpu | cpu | N | PLATFORM[:N]  (default: first GPU, else first device)\n"
		   "  --threads N     most threads for blocking calls (default 64)\n"
		   "  --workers on|off  run each tenant (or group) in a worker process of its\n"
		   "                  own (default on); off: every tenant in this process\n"
		   "  --user NAME     after opening everything as root, run as NAME with NAME's\n"
		   "                  groups (the GPU's: video, render)\n"
		   "  --libvirt URI   serve the domains of that libvirtd (qemu:///system) whose\n"
		   "                  metadata asks for a clmux GPU (docs/vm.md)\n"
		   "  --check-config  read the configuration (and --listen's tenant=), say\n"
		   "                  where it is wrong or that it is ok, and exit (2 or 0)\n"
		   "  --sandbox on|off|log  the workers' seccomp filter (default on; log: a call\n"
		   "                  outside it runs and the kernel's audit log names it)\n"
		   "  --state-dir DIR  checkpoints (clmuxctl checkpoint, and SIGTERM) write\n"
		   "                  every session there; DIR is made 0700 and must be\n"
		   "                  this user's alone\n"
		   "  CLMUX_LOG=debug|info|warn|err sets the log level (default info)\n");
}

/* --user: 1 when this process runs as that user now (or none was asked
 * for), 0 when the drop failed (logged). */
static int user_drop(const char *user)
{
	char why[200];

	if (!user || geteuid() != 0)
		return 1;
	if (cmx_privilege_drop(user, why, sizeof(why))) {
		cmx_err("%s", why);
		return 0;
	}
	cmx_info("running as %s (uid %u)", user, (unsigned)getuid());
	return 1;
}

/* What main() read from the command line. */
struct opts {
	const char *device, *config, *admin, *metrics, *user, *libvirt, *sandbox;
	const char *state_dir; /* --state-dir: checkpoints (host/checkpoint.c) */
	const char *vhost_specs[MAX_VHOST_SPECS];
	unsigned nvhost, threads;
	uint64_t window_us;
	/* A worker (started by the front end, host/front.c): its name, its
	 * control socket, and the profile decision the front end made. */
	const char *worker;
	int ctl, profile;
	int check; /* --check-config: read the configuration, say ok or why not */
};

/* The loop's signals: SIGTERM and SIGINT drain, SIGCHLD (front end) reaps,
 * SIGHUP is logged. */
static void signals_start(struct daemon *d, const sigset_t *mask)
{
	d->sig_fd = signalfd(-1, mask, SFD_CLOEXEC);
	d->sig_io.cb = sig_done;
	d->tick_io.cb = tick_done;
	sig_done(&d->sig_io, 0, 0);
}

/* A retired worker (its device state lost) ends with its last session. */
static void retire_tick(struct cmx_io *io, int res, unsigned flags)
{
	struct daemon *d = DAEMON_OF(io, retire_io);

	if (!d->srv.nsessions) {
		kill(getpid(), SIGTERM);
		return;
	}
	io_uring_prep_timeout(cmx_loop_sqe(d->srv.loop, &d->retire_io), &tick, 0, 0);
}

/* host/worker.c's retire hook, given the server worker_main() started it
 * with: the daemon around it. */
static void main_retire(struct cmx_server *srv)
{
	struct daemon *d = DAEMON_OF(srv, srv);

	for (unsigned i = 0; i < d->nlisteners; i++)
		cmx_listener_close(&d->srv, &d->listeners[i]);
	d->retire_io.cb = retire_tick;
	retire_tick(&d->retire_io, 0, 0);
}

/* The admin socket and, if asked for, the metrics endpoint: 0, or 1
 * (logged). */
static int admin_start(struct cmx_server *srv, const struct opts *o)
{
	char why[200];

	admin_setup(srv, o->admin);
	if (o->metrics && cmx_metrics_listen(srv, o->metrics, why, sizeof(why))) {
		cmx_err("--metrics %s: %s", o->metrics, why);
		return 1;
	}
	return 0;
}

/* What both kinds of process release at the end; the exit status. */
static int stopped(struct daemon *d, int e)
{
	struct cmx_server *srv = &d->srv;

	for (unsigned i = 0; i < d->nlisteners; i++)
		cmx_listener_fini(&d->listeners[i]);
	cmx_tenants_fini(&srv->tenants);
	cmx_admin_destroy(srv);
	cmx_vhost_destroy(srv);
	cmx_info("stopped");
	return e ? 1 : 0;
}

/* The sandbox of this worker: --sandbox, else the config's, else on. */
static int sandbox_mode(const struct cmx_server *srv, const struct opts *o)
{
	if (o->sandbox)
		return cmx_sandbox_parse(o->sandbox);
	return srv->tenants.sandbox ? srv->tenants.sandbox - 1 : CMX_SANDBOX_ON;
}

/* Descriptors for the sessions this worker's tenants may open (an upper
 * bound: every tenant of the config). */
static unsigned sandbox_nofile(const struct cmx_server *srv)
{
	unsigned long long n = 0;

	for (const struct cmx_tenant *t = srv->tenants.list; t; t = t->next)
		n += t->q.sessions == CMX_UNLIMITED ? 4096 : t->q.sessions;
	return cmx_sandbox_nofile(n);
}

/* Once set up, before the first tenant byte: the worker's filter and
 * rlimits (host/sandbox.c). 1 when it may serve. */
static int sandbox_enter(const struct cmx_server *srv, const struct opts *o)
{
	char why[200], name[96];
	int mode = sandbox_mode(srv, o);

	snprintf(name, sizeof(name), "clmuxd[%s]", o->worker);
	if (cmx_sandbox_enter(mode, CMX_SANDBOX_WORKER, name, sandbox_nofile(srv), why,
			      sizeof(why))) {
		cmx_err("sandbox %s: %s", cmx_sandbox_name(mode), why);
		return 0;
	}
	if (mode == CMX_SANDBOX_LOG)
		cmx_warn("sandbox log: calls outside the filter run, and the kernel logs them");
	return 1;
}

/* --state-dir, as the daemon's user: 1 when usable (or not asked for). */
static int state_dir_open(struct cmx_server *srv, const struct opts *o)
{
	int e = o->state_dir ? cmx_checkpoint_open(srv, o->state_dir) : 0;

	if (e)
		cmx_err("--state-dir %s: %s", o->state_dir,
			e == -EPERM ? "not a directory of this user's alone (mode 0700)"
				    : strerror(-e));
	return !e;
}

/* Every listener and the admin socket are open: a Type=notify unit's start
 * ends here, and clients ordered after it find the sockets. */
static void ready(void)
{
	int e;

	cmx_activation_done();
	e = cmx_notify("READY=1");

	if (e)
		cmx_warn("cannot tell the service manager we are ready: %s", strerror(-e));
}

static void restore_start(void *arg)
{
	cmx_restore_all(arg, cmx_worker_serves);
}

/* A worker: the daemon's core for the tenants the front end gives it. */
static int worker_main(struct daemon *d, struct opts *o, sigset_t *mask)
{
	struct cmx_server *srv = &d->srv;
	int e;

	srv->config_path = NULL; /* the front end saves quota changes */
	srv->profile = o->profile;
	if (cmx_device_open(srv, o->device))
		return 1;
	/* Builds' pre-flight children open the same device, in the same
	 * sandbox. */
	cmx_buildcheck_init(o->device, o->worker ? sandbox_mode(srv, o) : CMX_SANDBOX_OFF);
	e = cmx_loop_create(&srv->loop, (int)srv->tune.uring_coop);
	if (!e) {
		cmx_exec_init(srv);
		cmx_dispatch_attach(srv);
		cmx_restore_attach(srv);
	}
	if (e || cmx_executor_create(srv->loop, o->threads, &srv->exec) ||
	    cmx_sched_create(srv, o->window_us)) {
		cmx_err("cannot start the io_uring loop: %s", strerror(-e));
		return 1;
	}
	/* Kernel printf output: the loop reads fd 1 (host/kprintf.c). */
	e = cmx_kprintf_init(srv);
	if (e)
		cmx_warn("kernel printf output stays on stdout: %s", strerror(-e));
	/* A GPU's large transfers go through pinned staging (host/pinned.c). */
	if (cmx_pinned_start(srv->devices[0], &srv->tune))
		cmx_warn("no copy threads: transfers stay pageable");
	for (unsigned i = 0; i < d->nlisteners; i++)
		if (cmx_listener_start(srv, &d->listeners[i]))
			return 1;
	for (unsigned i = 0; i < o->nvhost; i++) {
		char why[200];
		if ((cmx_ivshmem_is_spec(o->vhost_specs[i]) ? cmx_ivshmem_listen : cmx_vhost_listen)(
			    srv, o->vhost_specs[i], why, sizeof(why))) {
			cmx_err("--listen %s: %s", o->vhost_specs[i], why);
			return 1;
		}
	}
	if (o->worker && cmx_worker_start(srv, o->ctl, o->worker, main_retire)) {
		cmx_err("worker %s: no control channel", o->worker);
		return 1;
	}
	if (!o->worker && admin_start(srv, o))
		return 1;
	/* Everything that needs root is open: the loop serves as --user (a
	 * worker started by a front end that has dropped already is that
	 * user from the start). */
	/* Every listener is open; the spec directory is root's. A worker's
	 * listeners are the front end's, whose spec it is. */
	d->keeps_cdi = !o->worker;
	if (d->keeps_cdi)
		cmx_cdikeep_write(srv, "start");
	if (!user_drop(o->user))
		return 1;
	if (!state_dir_open(srv, o))
		return 1;
	/* Its state files name it, and it restores only its own. */
	if (o->worker)
		cmx_checkpoint_worker(srv, o->worker);
	if (o->worker && !sandbox_enter(srv, o))
		return 1;
	if (!o->worker)
		ready();
	signals_start(d, mask);
	/* With --state-dir, the sessions a checkpoint left, on the loop. */
	if (cmx_checkpoint_enabled(srv))
		cmx_loop_post(srv->loop, restore_start, srv);
	e = cmx_loop_run(srv->loop);
	if (e)
		cmx_err("loop: %s", strerror(-e));
	cmx_worker_stop();
	cmx_kprintf_fini();
	cmx_watch_report(srv);
	cmx_pinned_stop();
	cmx_sched_destroy(srv);
	cmx_executor_destroy(srv->exec);
	cmx_loop_destroy(srv->loop);
	return stopped(d, e);
}

/* The front end: listeners, tenants and the admin socket; the OpenCL work
 * in worker processes (host/front.c). */
static int front_main(struct daemon *d, struct opts *o, sigset_t *mask)
{
	struct cmx_server *srv = &d->srv;
	struct cmx_front_opts fo = { .device = o->device, .config = srv->config_path,
				     .threads = o->threads, .window_us = o->window_us,
				     .profile = srv->profile, .user = o->user,
				     .sandbox = o->sandbox, .state_dir = o->state_dir };
	int e;

	srv->front = 1;
	sigaddset(mask, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, mask, NULL);
	e = cmx_loop_create(&srv->loop, (int)srv->tune.uring_coop);
	if (e) {
		cmx_err("cannot start the io_uring loop: %s", strerror(-e));
		return 1;
	}
	signals_start(d, mask);
	/* Every socket listens before the workers start (connections wait in
	 * the backlog meanwhile), the guests' first, as without workers. */
	if (cmx_front_start(srv, &fo, d->listeners, d->lspecs, d->nlisteners, o->vhost_specs,
			    o->nvhost))
		return 1;
	if (admin_start(srv, o) || cmx_front_spawn())
		return 1;
	/* Domains come and go from here on: the front end is ready for them. */
	if (o->libvirt && cmx_libvirt_start(srv, o->libvirt, srv->tenants.libvirt_group))
		return 1;
	/* Every listener is open; the spec directory is root's. */
	d->keeps_cdi = 1;
	cmx_cdikeep_write(srv, "start");
	if (!user_drop(o->user) || !state_dir_open(srv, o))
		return 1;
	/* The workers the state files need, restoring as guests come back. */
	cmx_front_state_workers();
	ready();
	e = cmx_loop_run(srv->loop);
	if (e)
		cmx_err("loop: %s", strerror(-e));
	cmx_loop_destroy(srv->loop);
	return stopped(d, e);
}

/* The number in s[0..len), digits only, in [min, max]: 0, or -EINVAL. */
static int opt_number(const char *s, size_t len, uint64_t min, uint64_t max, uint64_t *out)
{
	char buf[24];

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return cmx_uint_parse(buf, min, max, out);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' }, { "device", required_argument, NULL, 'd' },
		{ "threads", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		{ "config", required_argument, NULL, 'c' }, { "admin", required_argument, NULL, 'a' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "sched-window", required_argument, NULL, 'w' },
		{ "workers", required_argument, NULL, 'W' },
		{ "user", required_argument, NULL, 'u' },
		{ "libvirt", required_argument, NULL, 'L' },
		{ "sandbox", required_argument, NULL, 'X' },
		{ "state-dir", required_argument, NULL, 'D' },
		{ "check-config", no_argument, NULL, 'k' },
		/* Set by the front end when it starts a worker. */
		{ "worker", required_argument, NULL, 'K' }, { "ctl", required_argument, NULL, 'C' },
		{ "listen-fd", required_argument, NULL, 'F' },
		{ "profile", required_argument, NULL, 'P' },
		{ "shared-context", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .threads = 64, .window_us = CMX_SCHED_WINDOW_US, .ctl = -1,
			  .profile = -1 };
	/* Static: what hangs off it stays reachable until exit (LeakSanitizer). */
	static struct daemon d = { .sig_fd = -1 };
	struct cmx_server *srv = &d.srv;
	int use_workers = 1;
	sigset_t mask;
	int opt;

	/* A build's pre-flight child (host/buildcheck.c), started by a worker:
	 * no daemon, only the build. */
	if (argc == 2 && !strcmp(argv[1], "--build-check"))
		return cmx_buildcheck_main();
	/* The filter's system calls, for tools/seccomp-trace.py. */
	if (argc >= 2 && !strcmp(argv[1], "--sandbox-list")) {
		cmx_sandbox_list(stdout, argc > 2 && !strcmp(argv[2], "build") ? CMX_SANDBOX_BUILD
									    : CMX_SANDBOX_WORKER);
		return 0;
	}

	cmx_log_init("clmuxd", CMX_LOG_INFO);
	/* The clmux ICD, if installed here, must not connect back to us. */
	setenv("CLMUX_DISABLE", "1", 1);
	cmx_staging_init(&srv->staging);
	while ((opt = getopt_long(argc, argv, "l:d:t:hc:a:m:w:u:", opts, NULL)) != -1) {
		char why[256];
		const char *colon;
		uint64_t n;
		switch (opt) {
		case 'l':
			if ((cmx_vhost_is_spec(optarg) || cmx_ivshmem_is_spec(optarg)) &&
			    o.nvhost < MAX_VHOST_SPECS) {
				o.vhost_specs[o.nvhost++] = optarg; /* opened once the loop runs */
				break;
			}
			if (d.nlisteners == MAX_LISTEN ||
			    cmx_listener_init(&d.listeners[d.nlisteners], optarg, why,
					      sizeof(why))) {
				fprintf(stderr, "clmuxd: --listen %s: %s\n", optarg,
					d.nlisteners == MAX_LISTEN ? "too many" : why);
				return 2;
			}
			d.lspecs[d.nlisteners++] = optarg;
			break;
		case 'F':
			/* FD:SPEC, a listening socket the front end made. */
			colon = strchr(optarg, ':');
			if (!colon ||
			    opt_number(optarg, (size_t)(colon - optarg), 3, INT_MAX, &n) ||
			    d.nlisteners == MAX_LISTEN ||
			    cmx_listener_init(&d.listeners[d.nlisteners], colon + 1, why,
					      sizeof(why))) {
				fprintf(stderr, "clmuxd: --listen-fd %s: bad\n", optarg);
				return 2;
			}
			d.listeners[d.nlisteners].fd = (int)n;
			d.listeners[d.nlisteners].inherited = 1;
			d.lspecs[d.nlisteners++] = colon + 1;
			break;
		case 'd':
			o.device = optarg;
			break;
		case 'c':
			o.config = optarg;
			break;
		case 'k':
			o.check = 1;
			break;
		case 'a':
			o.admin = optarg;
			break;
		case 'm':
			o.metrics = optarg;
			break;
		case 'w':
			if (opt_number(optarg, strlen(optarg), 0, UINT64_MAX / 1000,
				       &o.window_us)) {
				fprintf(stderr,
					"clmuxd: --sched-window %s: microseconds expected\n",
					optarg);
				return 2;
			}
			break;
		case 'u':
			o.user = optarg;
			break;
		case 'L':
			o.libvirt = optarg;
			break;
		case 'X':
			if (cmx_sandbox_parse(optarg) < 0) {
				fprintf(stderr, "clmuxd: --sandbox on|off|log\n");
				return 2;
			}
			o.sandbox = optarg;
			break;
		case 't':
			if (opt_number(optarg, strlen(optarg), 0, UINT_MAX, &n)) {
				fprintf(stderr, "clmuxd: --threads %s: a number expected\n",
					optarg);
				return 2;
			}
			o.threads = n ? (unsigned)n : 1;
			break;
		case 'W':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "clmuxd: --workers on|off\n");
				return 2;
			}
			use_workers = !strcmp(optarg, "on");
			break;
		case 'D':
			o.state_dir = optarg;
			break;
		case 'K':
			o.worker = optarg;
			break;
		case 'C':
			/* Bad: below 3, which the check after the options refuses. */
			o.ctl = opt_number(optarg, strlen(optarg), 3, INT_MAX, &n) ? -1 : (int)n;
			break;
		case 'P':
			if (opt_number(optarg, strlen(optarg), 0, 1, &n)) {
				fprintf(stderr, "clmuxd: --profile %s: 0 or 1\n", optarg);
				return 2;
			}
			o.profile = (int)n;
			break;
		case 'S':
			srv->shared_context = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (o.worker && o.ctl < 3)) {
		usage(stderr);
		return 2;
	}
	if (o.worker) {
		char name[96];
		snprintf(name, sizeof(name), "clmuxd[%s]", o.worker);
		cmx_log_init(strdup(name), CMX_LOG_INFO);
	}
	if (!o.worker) {
		cmx_notify_init();
		cmx_activation_init();
	}
	if (tenants_setup(&d, o.config))
		return 2;
	if (o.check) {
		printf("%s: ok, %u tenant%s\n",
		       srv->config_path ? srv->config_path : "no configuration file",
		       srv->tenants.count, srv->tenants.count == 1 ? "" : "s");
		return 0;
	}
	/* A worker serves what the front end gives it: never libvirt. */
	if (!o.libvirt && !o.worker && srv->tenants.libvirt[0])
		o.libvirt = srv->tenants.libvirt;
	if (!d.nlisteners && !o.nvhost && !o.worker && !o.libvirt) {
		usage(stderr);
		return 2;
	}
	if (o.libvirt && !use_workers) {
		fprintf(stderr, "clmuxd: --libvirt needs worker processes (--workers on)\n");
		return 2;
	}
	/* Domains are tenants that may share the device: their scheduling
	 * needs device time. */
	if (o.libvirt)
		srv->profile = 1;
	if (o.profile < 0)
		o.profile = srv->profile;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	/* Blocked before any thread starts, so only the signalfd sees them. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	if (use_workers && !o.worker)
		return front_main(&d, &o, &mask);
	return worker_main(&d, &o, &mask);
}
