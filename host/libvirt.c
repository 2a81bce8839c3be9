// SPDX-License-Identifier: MIT
// clmuxd follows libvirt: domains with a <clmux:gpu/> element become tenants
// served through a VM device of their own while they run.
#define _GNU_SOURCE
#include "config.h"
#include "libvirt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "front.h"
#include "ivshmem.h"
#include "log.h"
#include "tenant.h"

#ifdef HAVE_LIBVIRT
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "domxml.h"

#define SHM_DIR		 "/dev/shm"
#define RUN_DIR		 "/run/clmux"
#define GUEST_CID	 3 /* each VM has a device of its own: any CID from 3 */
#define REGION_DEFAULT	 (128ull << 20)
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS	 8000

enum transport { IVSHMEM, VSOCK };

/*
 * A domain with the element, as the front end knows it (loop thread only).
 * Its device file exists from the time clmuxd learns of it (defined, or its
 * hook's prepare) until it is undefined; the tenant and the worker that
 * serves the device exist while it runs.
 */
struct dom {
	char uuid[37];
	char name[CMX_TENANT_NAME];
	enum transport transport;
	uint64_t size; /* ivshmem: the region (the guest's BAR) */
	struct cmx_quota q;
	char group[CMX_TENANT_NAME];
	char path[128]; /* its device file: the region, or the vhost-user socket */
	char spec[512]; /* the --listen spec its worker serves */
	int made;	/* the device file was made */
	int fd;		/* vsock: the socket listening on path, or -1 */
	struct cmx_tenant *t;
	int seen; /* in the listing being taken */
	struct dom *next;
};

/* What the libvirt thread saw, posted to the loop. */
struct report {
	enum { R_DOMAIN, R_GONE, R_SYNC, R_SYNCED } kind;
	char uuid[37];
	int running;
	int ok; /* x was read; else why */
	struct cmx_domxml x;
	char why[200];
};

static struct {
	struct cmx_server *srv;
	char uri[256];
	char group[CMX_TENANT_NAME];
	struct dom *doms;
	/* The libvirt thread's. */
	pthread_t thread;
	virConnectPtr conn;
	int closed;
} lv;

/* ---- the loop side ---- */

static struct dom *dom_by_uuid(const char *uuid)
{
	for (struct dom *d = lv.doms; d; d = d->next)
		if (!strcmp(d->uuid, uuid))
			return d;
	return NULL;
}

static struct dom *dom_by_name(const char *name)
{
	for (struct dom *d = lv.doms; d; d = d->next)
		if (!strcmp(d->name, name))
			return d;
	return NULL;
}

static int is_domain_tenant(const struct cmx_tenant *t)
{
	for (struct dom *d = lv.doms; d; d = d->next)
		if (d->t == t)
			return 1;
	return 0;
}

/*
 * The element's attributes into want (name, uuid, transport, size, quotas,
 * group, device spec). 0, or -EINVAL with the attribute and why in why:
 * the domain is then not served.
 */
static int settle(const struct cmx_domxml *x, struct dom *want, char *why, size_t whylen)
{
	struct dom *other;
	struct cmx_tenant *t;
	char qwhy[160];

	memset(want, 0, sizeof(*want));
	/* The name becomes the tenant's and a file's: no path characters. */
	if (!cmx_tenant_name_ok(x->name)) {
		snprintf(why, whylen,
			 "its name is not a tenant name ([A-Za-z0-9_.-], at most %d characters)",
			 CMX_TENANT_NAME - 1);
		return -EINVAL;
	}
	strcpy(want->name, x->name);
	snprintf(want->uuid, sizeof(want->uuid), "%s", x->uuid);
	other = dom_by_name(x->name);
	if (other && strcmp(other->uuid, x->uuid)) {
		snprintf(why, whylen, "the name is domain %s's (UUID collision)", other->uuid);
		return -EINVAL;
	}
	t = cmx_tenant_find(&lv.srv->tenants, x->name);
	if (t && !is_domain_tenant(t)) {
		snprintf(why, whylen, "tenant '%s' of the config has that name", want->name);
		return -EINVAL;
	}
	want->q = lv.srv->tenants.defaults;
	want->transport = IVSHMEM;
	want->size = REGION_DEFAULT;
	for (unsigned i = 0; i < x->nattrs; i++) {
		const char *k = x->key[i], *v = x->value[i];
		if (!strcmp(k, "transport")) {
			if (!strcmp(v, "ivshmem")) {
				want->transport = IVSHMEM;
			} else if (!strcmp(v, "vsock")) {
				want->transport = VSOCK;
			} else {
				snprintf(why, whylen, "transport='%s': ivshmem or vsock", v);
				return -EINVAL;
			}
		} else if (!strcmp(k, "size")) {
			struct cmx_quota q;
			/* cmx_quota_set's sizes; QEMU wants a power of two. */
			if (cmx_quota_set(&q, "mem", v, qwhy, sizeof(qwhy)) ||
			    q.mem < (4ull << 20) || q.mem > (1ull << 30) || (q.mem & (q.mem - 1))) {
				snprintf(why, whylen, "size='%s': a power of two from 4M to 1G", v);
				return -EINVAL;
			}
			want->size = q.mem;
		} else if (!strcmp(k, "group")) {
			if (!cmx_tenant_name_ok(v)) {
				snprintf(why, whylen, "group='%s': not a group name", v);
				return -EINVAL;
			}
			strcpy(want->group, v);
		} else if (cmx_quota_set(&want->q, k, v, qwhy, sizeof(qwhy))) {
			snprintf(why, whylen, "%s", qwhy);
			return -EINVAL;
		}
	}
	want->fd = -1;
	if (want->transport == VSOCK) {
		snprintf(want->path, sizeof(want->path), RUN_DIR "/vm-%s.vsock", want->name);
		return 0;
	}
	snprintf(want->path, sizeof(want->path), SHM_DIR "/clmux-%s", want->name);
	snprintf(want->spec, sizeof(want->spec), "ivshmem:%s,size=%" PRIu64 "M,tenant=%s%s%s",
		 want->path, want->size >> 20, want->name, lv.group[0] ? ",mode=0660,group=" : "",
		 lv.group);
	return 0;
}

/* vsock: the vhost-user socket QEMU connects to at its start, listening
 * from now on; its worker takes the socket over (fd=) when the domain runs,
 * and QEMU's connection waits in the backlog until then. */
static int vsock_make(struct dom *d)
{
	char why[200], spec[300];
	struct cmx_addr a;
	int fd;

	if (d->fd >= 0)
		return 0;
	mkdir(RUN_DIR, 0755);
	snprintf(spec, sizeof(spec), "unix:%s%s%s", d->path,
		 lv.group[0] ? ",mode=0660,group=" : "", lv.group);
	if (cmx_addr_parse(spec, &a, why, sizeof(why))) {
		cmx_warn("domain %s: its device: %s", d->name, why);
		return -EINVAL;
	}
	fd = cmx_addr_listen(&a);
	if (fd < 0) {
		cmx_warn("domain %s: its device: cannot listen on %s: %s", d->name, d->path,
			 strerror(-fd));
		return fd;
	}
	d->fd = fd;
	d->made = 1;
	snprintf(d->spec, sizeof(d->spec), "vhost-user-vsock:%s,cid=%d,tenant=%s,fd=%d", d->path,
		 GUEST_CID, d->name, fd);
	return 0;
}

/* The device file goes (the domain is undefined, or its device changed). */
static void dom_unmake(struct dom *d)
{
	if (!d->made)
		return;
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	unlink(d->path);
	d->made = 0;
}

/* Makes the device file, if it is not there yet. 0 or -errno (logged). */
static int dom_make(struct dom *d)
{
	char why[300], spec[512];
	int e;

	if (d->transport == VSOCK)
		return vsock_make(d);
	if (d->made && !access(d->path, F_OK))
		return 0;
	/* Without tenant=: the front end names no tenant before the domain
	 * runs. */
	snprintf(spec, sizeof(spec), "ivshmem:%s,size=%" PRIu64 "M%s%s", d->path, d->size >> 20,
		 lv.group[0] ? ",mode=0660,group=" : "", lv.group);
	e = cmx_ivshmem_create(lv.srv, spec, why, sizeof(why));
	if (e) {
		cmx_warn("domain %s: its device: %s", d->name, why);
		return e;
	}
	d->made = 1;
	return 0;
}

/* The domain runs: its tenant, and a worker serving its device. */
static void dom_serve(struct dom *d)
{
	struct cmx_tenant *t;
	int e;

	if (d->t || dom_make(d))
		return;
	t = cmx_tenant_get(&lv.srv->tenants, d->name);
	if (!t) {
		cmx_err("domain %s: out of memory", d->name);
		return;
	}
	t->q = d->q;
	strcpy(t->group, d->group);
	d->t = t;
	e = cmx_front_device_add(t, d->spec, d->fd);
	if (e) {
		cmx_err("domain %s: no worker for its device: %s", d->name, strerror(-e));
		d->t = NULL;
		cmx_tenant_remove(&lv.srv->tenants, t);
		return;
	}
	cmx_info("domain %s (%s) runs: tenant %s, served through %s", d->name, d->uuid, t->name,
		 d->path);
}

/* The domain stopped: its worker ends (everything its sessions held goes
 * back), the tenant goes, and the region's memory is freed; the file stays
 * for its next start. */
static void dom_unserve(struct dom *d, const char *why)
{
	if (!d->t)
		return;
	cmx_front_device_remove(d->spec);
	cmx_tenant_remove(&lv.srv->tenants, d->t);
	d->t = NULL;
	if (d->made && d->transport == IVSHMEM) {
		int fd = open(d->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				  (off_t)d->size);
			close(fd);
		}
	}
	cmx_info("domain %s %s: its tenant and everything it held are released", d->name, why);
}

static void dom_forget(struct dom *d, const char *why)
{
	dom_unserve(d, why);
	dom_unmake(d);
	for (struct dom **p = &lv.doms; *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			break;
		}
	cmx_info("domain %s %s: no longer served", d->name, why);
	free(d);
}

/* A domain's element, as read now: d is created, updated or forgotten, and
 * served while running. 0, or -EINVAL when its element is refused (logged). */
static int dom_update(const struct cmx_domxml *x, int running)
{
	struct dom *d = dom_by_uuid(x->uuid), want;
	char why[200];

	if (!x->has_gpu) {
		if (d)
			dom_forget(d, "lost its <clmux:gpu> element");
		return 0;
	}
	if (settle(x, &want, why, sizeof(why))) {
		cmx_warn("domain %s (%s): <clmux:gpu>: %s: not served", x->name, x->uuid, why);
		if (d)
			dom_forget(d, "has a refused <clmux:gpu> element");
		return -EINVAL;
	}
	if (d && strcmp(d->name, want.name))
		dom_forget(d, "was renamed");
	else if (d && d->t && running) {
		/* Running: quotas change live; the device stays as it started. */
		if (memcmp(&d->q, &want.q, sizeof(want.q))) {
			d->q = d->t->q = want.q;
			cmx_front_quota(d->t);
			cmx_info("domain %s: quotas changed by its metadata", d->name);
		}
		if (d->size != want.size || d->transport != want.transport ||
		    strcmp(d->group, want.group))
			cmx_info("domain %s: its device and group change at its next start",
				 d->name);
		d->seen = 1;
		return 0;
	} else if (d && d->t) {
		dom_unserve(d, "stopped");
	}
	d = dom_by_uuid(x->uuid);
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return -ENOMEM;
		*d = want;
		d->next = lv.doms;
		lv.doms = d;
	} else {
		/* Stopped: everything may change before its next start. */
		if (d->transport != want.transport || d->size != want.size ||
		    strcmp(d->path, want.path))
			dom_unmake(d);
		want.made = d->made;
		want.fd = d->fd;
		if (d->fd >= 0)
			strcpy(want.spec, d->spec);
		want.next = d->next;
		*d = want;
	}
	d->seen = 1;
	if (dom_make(d))
		return -EIO;
	if (running)
		dom_serve(d);
	return 0;
}

static void apply(void *arg)
{
	struct report *r = arg;
	struct dom *d;

	switch (r->kind) {
	case R_SYNC:
		for (d = lv.doms; d; d = d->next)
			d->seen = 0;
		break;
	case R_SYNCED:
		/* Gone while clmuxd could not hear of it. */
		for (;;) {
			for (d = lv.doms; d && d->seen; d = d->next)
				;
			if (!d)
				break;
			dom_forget(d, "is gone");
		}
		break;
	case R_GONE:
		if ((d = dom_by_uuid(r->uuid)))
			dom_forget(d, "is gone (undefined)");
		break;
	case R_DOMAIN:
		if (!r->ok) {
			/* Unreadable now: what clmuxd serves stays as it is. */
			if ((d = dom_by_uuid(r->uuid)))
				d->seen = 1;
			cmx_warn("libvirt: domain %s: %s", r->uuid, r->why);
			break;
		}
		dom_update(&r->x, r->running);
		break;
	}
	free(r);
}

/* ---- admin requests ---- */

static void domain_xml(struct dom *d, struct cmx_text *out)
{
	if (d->transport == VSOCK) {
		/* libvirt's <vsock> needs the kernel's vhost-vsock: the device
		 * goes in as QEMU arguments, on a PCI slot libvirt leaves free
		 * on a 'pc' machine. */
		cmx_text_add(out,
			     "<!-- on <domain>: xmlns:qemu='http://libvirt.org/schemas/domain/"
			     "qemu/1.0' -->\n"
			     "<!-- in <domain>: the guest's memory shared with clmuxd -->\n"
			     "<memoryBacking>\n"
			     "  <source type='memfd'/>\n"
			     "  <access mode='shared'/>\n"
			     "</memoryBacking>\n"
			     "<!-- in <domain>, last: clmuxd is the guest's virtio-vsock device -->\n"
			     "<qemu:commandline>\n"
			     "  <qemu:arg value='-chardev'/>\n"
			     "  <qemu:arg value='socket,id=clmux,path=%s'/>\n"
			     "  <qemu:arg value='-device'/>\n"
			     "  <qemu:arg value='vhost-user-vsock-pci,chardev=clmux,bus=pci.0,"
			     "addr=0x1f'/>\n"
			     "</qemu:commandline>\n"
			     "<!-- in the guest: server = vsock:2:7447 in /etc/clmux/client.conf -->\n",
			     d->path);
		return;
	}
	cmx_text_add(out,
		     "<!-- in <devices>: clmux's region, QEMU's ivshmem-plain device -->\n"
		     "<shmem name='clmux-%s'>\n"
		     "  <model type='ivshmem-plain'/>\n"
		     "  <size unit='M'>%" PRIu64 "</size>\n"
		     "</shmem>\n"
		     "<!-- in the guest: server = ivshmem in /etc/clmux/client.conf, or\n"
		     "     CLMUX_SERVER=ivshmem -->\n",
		     d->name, d->size >> 20);
}

int cmx_libvirt_admin(struct cmx_server *srv, char **w, unsigned n, struct cmx_text *out)
{
	struct dom *d;

	if (!strcmp(w[0], "domain-xml")) {
		if (n != 2) {
			cmx_text_add(out, "error: domain-xml NAME\n");
		} else if (!(d = dom_by_name(w[1]))) {
			cmx_text_add(
			    out, "error: no domain '%s' with a <clmux:gpu> element%s\n", w[1],
			    lv.srv ? "" : " (clmuxd does not follow libvirt: --libvirt URI)");
		} else {
			cmx_text_add(out, "ok\n");
			domain_xml(d, out);
		}
		return 1;
	}
	if (!strcmp(w[0], "domain-prepare")) {
		struct cmx_domxml x = {.has_gpu = 1};
		if (!lv.srv) {
			cmx_text_add(out,
				     "error: clmuxd does not follow libvirt (--libvirt URI)\n");
			return 1;
		}
		if (n < 3 || n - 3 > CMX_DOMXML_ATTRS || strlen(w[1]) >= sizeof(x.name) ||
		    strlen(w[2]) != sizeof(x.uuid) - 1) {
			cmx_text_add(out, "error: domain-prepare NAME UUID KEY=VALUE...\n");
			return 1;
		}
		strcpy(x.name, w[1]);
		strcpy(x.uuid, w[2]);
		for (unsigned i = 3; i < n; i++) {
			char *eq = strchr(w[i], '=');
			if (!eq || (size_t)(eq - w[i]) >= CMX_DOMXML_VALUE ||
			    strlen(eq + 1) >= CMX_DOMXML_VALUE) {
				cmx_text_add(out, "error: bad attribute '%s'\n", w[i]);
				return 1;
			}
			*eq = '\0';
			strcpy(x.key[x.nattrs], w[i]);
			strcpy(x.value[x.nattrs++], eq + 1);
		}
		d = dom_by_uuid(x.uuid);
		if (d && d->t) {
			/* It runs as far as clmuxd knows: the stop has not
			 * arrived yet. Its device is there. */
			cmx_text_add(out, "ok\n");
			return 1;
		}
		/* Not running: the hook is about to start it. */
		if (dom_update(&x, 0) || !(d = dom_by_uuid(x.uuid)) || !d->made) {
			cmx_text_add(out, "error: domain %s not served (clmuxd's log says why)\n",
				     x.name);
			return 1;
		}
		/* QEMU waits at its start for vhost-user's answers, and libvirt
		 * tells of a start only once QEMU is up: a vsock domain's worker
		 * starts now. */
		if (d->transport == VSOCK)
			dom_serve(d);
		if (d->transport == VSOCK && !d->t)
			cmx_text_add(out, "error: domain %s: no worker for its device\n", x.name);
		else
			cmx_text_add(out, "ok\n");
		return 1;
	}
	return 0;
}

/* ---- the libvirt thread ---- */

static void post(struct report *r)
{
	cmx_loop_post(lv.srv->loop, apply, r);
}

static void post_kind(int kind)
{
	struct report *r = calloc(1, sizeof(*r));

	if (r) {
		r->kind = kind;
		post(r);
	}
}

/* Reads a domain now and posts what it is: its XML (the live one while it
 * runs, where `virsh metadata --live` lands), or gone. */
static void report_domain(virDomainPtr dom)
{
	struct report *r = calloc(1, sizeof(*r));
	char *xml;

	if (!r || virDomainGetUUIDString(dom, r->uuid) < 0) {
		free(r);
		return;
	}
	r->kind = R_DOMAIN;
	xml = virDomainGetXMLDesc(dom, 0);
	if (!xml) {
		virErrorPtr err = virGetLastError();
		if (err && err->code == VIR_ERR_NO_DOMAIN)
			r->kind = R_GONE;
		else
			snprintf(r->why, sizeof(r->why), "cannot read its XML: %s",
				 err && err->message ? err->message : "unknown error");
		post(r);
		return;
	}
	r->ok = !cmx_domxml_parse(xml, strlen(xml), &r->x, r->why, sizeof(r->why));
	free(xml);
	r->running = virDomainIsActive(dom) == 1;
	post(r);
}

static int on_lifecycle(virConnectPtr c, virDomainPtr dom, int event, int detail, void *opaque)
{
	report_domain(dom);
	return 0;
}

static void on_metadata(virConnectPtr c, virDomainPtr dom, int type, const char *nsuri,
			void *opaque)
{
	if (type == VIR_DOMAIN_METADATA_ELEMENT && nsuri && !strcmp(nsuri, CMX_DOMXML_NS))
		report_domain(dom);
}

static void on_close(virConnectPtr c, int reason, void *opaque)
{
	lv.closed = 1;
}

/* libvirt prints its errors on stderr unless told otherwise: clmuxd logs
 * the ones it acts on. */
static void quiet(void *opaque, virErrorPtr err)
{
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One connection: from open until libvirtd goes away. 0 when it was open. */
static int follow(void)
{
	virDomainPtr *doms = NULL;
	int life, meta, n;

	lv.conn = virConnectOpen(lv.uri);
	if (!lv.conn)
		return -ECONNREFUSED;
	lv.closed = 0;
	virConnectRegisterCloseCallback(lv.conn, on_close, NULL, NULL);
	/* A libvirtd that hangs is noticed too, not only one that exits. */
	virConnectSetKeepAlive(lv.conn, 5, 3);
	life =
	    virConnectDomainEventRegisterAny(lv.conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
					     VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), NULL, NULL);
	meta = virConnectDomainEventRegisterAny(lv.conn, NULL, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
						VIR_DOMAIN_EVENT_CALLBACK(on_metadata), NULL, NULL);
	if (life < 0 || meta < 0)
		cmx_warn("libvirt: %s: no domain events: domains are read only at connect", lv.uri);
	/* Events from here on; the listing after them, so nothing falls
	 * between (reading a domain twice is harmless). */
	post_kind(R_SYNC);
	n = virConnectListAllDomains(lv.conn, &doms, 0);
	for (int i = 0; i < n; i++) {
		report_domain(doms[i]);
		virDomainFree(doms[i]);
	}
	free(doms);
	if (n >= 0)
		post_kind(R_SYNCED);
	cmx_info("libvirt: following %s (%d domains)", lv.uri, n);
	while (!lv.closed && virEventRunDefaultImpl() == 0)
		;
	if (life >= 0)
		virConnectDomainEventDeregisterAny(lv.conn, life);
	if (meta >= 0)
		virConnectDomainEventDeregisterAny(lv.conn, meta);
	virConnectUnregisterCloseCallback(lv.conn, on_close);
	virConnectClose(lv.conn);
	lv.conn = NULL;
	cmx_warn("libvirt: lost %s; its domains are still served; reconnecting", lv.uri);
	return 0;
}

static void *thread_main(void *arg)
{
	unsigned pause = BACKOFF_FIRST_MS, failures = 0;

	for (;;) {
		if (!follow()) {
			pause = BACKOFF_FIRST_MS;
			failures = 0;
		} else if (!failures++) {
			virErrorPtr err = virGetLastError();
			cmx_warn("libvirt: cannot connect to %s: %s; trying again", lv.uri,
				 err && err->message ? err->message : "unknown error");
		}
		pause_ms(pause);
		pause = pause * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : pause * 2;
	}
	return NULL;
}

int cmx_libvirt_start(struct cmx_server *srv, const char *uri, const char *group)
{
	pthread_attr_t attr;
	int e;

	if (strlen(uri) >= sizeof(lv.uri) || (group && strlen(group) >= sizeof(lv.group))) {
		cmx_err("libvirt: URI or group too long");
		return -EINVAL;
	}
	lv.srv = srv;
	strcpy(lv.uri, uri);
	if (group)
		strcpy(lv.group, group);
	virSetErrorFunc(NULL, quiet);
	if (virInitialize() < 0 || virEventRegisterDefaultImpl() < 0) {
		cmx_err("libvirt: cannot initialize the library");
		return -EIO;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	e = pthread_create(&lv.thread, &attr, thread_main, NULL);
	pthread_attr_destroy(&attr);
	if (e) {
		cmx_err("libvirt: cannot start its thread: %s", strerror(e));
		return -e;
	}
	return 0;
}

#else /* !HAVE_LIBVIRT */

int cmx_libvirt_start(struct cmx_server *srv, const char *uri, const char *group)
{
	cmx_err("--libvirt %s: clmuxd was built without libvirt (configure --with-libvirt)", uri);
	return -ENOTSUP;
}

int cmx_libvirt_admin(struct cmx_server *srv, char **w, unsigned n, struct cmx_text *out)
{
	if (strcmp(w[0], "domain-xml") && strcmp(w[0], "domain-prepare"))
		return 0;
	cmx_text_add(out, "error: clmuxd was built without libvirt\n");
	return 1;
}

#endif
