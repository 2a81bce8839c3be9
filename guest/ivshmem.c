// SPDX-License-Identifier: MIT
// ivshmem in the guest: the region is a PCI BAR mapped through sysfs; a slot
// is held by an OFD lock on its first byte; a new generation asks the
// daemon for a fresh session; both sides poll, so a wait is a nap that
// grows from 10 us to the limit (1 ms; CLMUX_IVSHMEM_POLL_US).
#define _GNU_SOURCE
#include "ivshmem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "area_layout.h"
#include "env.h"
#include "log.h"

#define MIN_NAP_NS 10000ull
#define MAX_NAP_NS 1000000ull
#define SPIN_US	   50
#define BEAT_MS 100
#define READY_MS 5000	  /* the daemon has this long to make the session */
#define NO_DAEMON_MS 1000 /* ... and must be seen polling within this */

/* Slots this process holds, let go at exit(): the daemon ends their
 * sessions at once instead of waiting for the beat to stop. A child
 * forked after the session opened shares the mapping but must not end the
 * parent's session when it exits. */
#define MAX_OPEN 8
static struct cmx_ivs_slot *open_slots[MAX_OPEN];
static pid_t owner;

static void remember(struct cmx_ivs_slot *ctl, struct cmx_ivs_slot *was)
{
	for (int i = 0; i < MAX_OPEN; i++) {
		struct cmx_ivs_slot *expect = was;
		if (__atomic_compare_exchange_n(&open_slots[i], &expect, ctl, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return;
	}
}

__attribute__((destructor)) static void let_go_at_exit(void)
{
	if (getpid() != __atomic_load_n(&owner, __ATOMIC_RELAXED))
		return;
	for (int i = 0; i < MAX_OPEN; i++) {
		struct cmx_ivs_slot *ctl = __atomic_load_n(&open_slots[i], __ATOMIC_RELAXED);
		if (ctl)
			__atomic_store_n(&ctl->guest_gen, 0, __ATOMIC_RELEASE);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

/* Checks the region header against the file: every slot inside it. */
static int check_hdr(const struct cmx_ivs_hdr *h, uint64_t size)
{
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != CMX_IVS_MAGIC)
		return -ENODEV;
	if (h->version != CMX_IVS_VERSION || h->size > size || !h->nslots ||
	    h->nslots > CMX_IVS_MAX_SLOTS || h->slot_off % CMX_IVS_PAGE ||
	    h->slot_size % CMX_IVS_PAGE || h->slot_size <= CMX_IVS_AREA_AT ||
	    h->slot_off > h->size || h->slot_size > (h->size - h->slot_off) / h->nslots)
		return -EPROTO;
	return 0;
}

/* Locks byte `off` of fd for this open file (not per process: threads of
 * one process opening twice would not see each other otherwise). */
static int lock_byte(int fd, uint64_t off)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)off,
			    .l_len = 1 };

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

static int map_region(const char *path, struct cmx_givs *v)
{
	struct stat st;
	int e;

	v->fd = open(path, O_RDWR | O_CLOEXEC);
	if (v->fd < 0)
		return -errno;
	if (fstat(v->fd, &st) || st.st_size < (off_t)CMX_IVS_PAGE) {
		e = -ENODEV;
		goto fail;
	}
	v->size = (uint64_t)st.st_size;
	v->map = mmap(NULL, v->size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->map == MAP_FAILED) {
		e = -errno;
		goto fail;
	}
	e = check_hdr((const struct cmx_ivs_hdr *)v->map, v->size);
	if (!e)
		return 0;
	munmap(v->map, v->size);
fail:
	close(v->fd);
	v->fd = -1;
	v->map = NULL;
	return e;
}

int cmx_givs_discover(char *buf, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *de;
	int e = -ENOENT;

	if (!d)
		return -ENOENT;
	while (e && (de = readdir(d))) {
		char p[300];
		unsigned vendor = 0, device = 0;
		FILE *f;
		struct cmx_givs v;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/vendor", de->d_name);
		if ((f = fopen(p, "re"))) {
			if (fscanf(f, "%x", &vendor) != 1)
				vendor = 0;
			fclose(f);
		}
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/device", de->d_name);
		if ((f = fopen(p, "re"))) {
			if (fscanf(f, "%x", &device) != 1)
				device = 0;
			fclose(f);
		}
		if (vendor != CMX_IVS_PCI_VENDOR || device != CMX_IVS_PCI_DEVICE)
			continue;
		/* Another ivshmem device may hold something else. */
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/resource2", de->d_name);
		if (map_region(p, &v))
			continue;
		munmap(v.map, v.size);
		close(v.fd);
		if (snprintf(buf, len, "ivshmem:%s", p) < (int)len)
			e = 0;
	}
	closedir(d);
	return e;
}

/* Takes the first slot no other process of this VM holds. */
static int take_slot(struct cmx_givs *v)
{
	const struct cmx_ivs_hdr *h = (const struct cmx_ivs_hdr *)v->map;

	for (uint32_t i = 0; i < h->nslots; i++) {
		uint64_t off = h->slot_off + i * h->slot_size;
		int e = lock_byte(v->fd, off);

		if (e == -EAGAIN || e == -EACCES)
			continue;
		if (e)
			return e;
		v->ctl = (struct cmx_ivs_slot *)(v->map + off);
		v->area = v->map + off + CMX_IVS_AREA_AT;
		v->area_len = h->slot_size - CMX_IVS_AREA_AT;
		return 0;
	}
	return -EBUSY;
}

int cmx_givs_nap(struct cmx_givs *v, uint64_t *nap)
{
	uint64_t w = __atomic_load_n(&v->ctl->host, __ATOMIC_ACQUIRE);
	uint64_t beat = __atomic_load_n(&v->ctl->host_beat, __ATOMIC_RELAXED), now = now_ns();

	/* Our own goodbye at exit (let_go_at_exit()): threads still waiting
	 * then sleep on quietly until the process is gone. */
	if (w != CMX_IVS_WORD(CMX_IVS_READY, v->gen) &&
	    __atomic_load_n(&v->ctl->guest_gen, __ATOMIC_ACQUIRE))
		return -ECONNRESET;
	if (beat != __atomic_load_n(&v->seen, __ATOMIC_RELAXED)) {
		__atomic_store_n(&v->seen, beat, __ATOMIC_RELAXED);
		__atomic_store_n(&v->seen_ns, now, __ATOMIC_RELAXED);
	} else if ((int64_t)(now - __atomic_load_n(&v->seen_ns, __ATOMIC_RELAXED)) >
		   (int64_t)CMX_IVS_DEAD_MS * 1000000) {
		/* Signed: another thread may have stored a later time than
		 * our `now` meanwhile. */
		cmx_err("ivshmem: the daemon stopped polling");
		return -ECONNRESET;
	}
	*nap = *nap ? *nap * 2 : MIN_NAP_NS;
	if (*nap > v->max_nap_ns)
		*nap = v->max_nap_ns;
	nap_ns(*nap);
	return 0;
}

/* Asks for a fresh session and waits until the daemon has it ready. */
static int handshake(struct cmx_givs *v)
{
	uint64_t start = now_ns(), beat0 = __atomic_load_n(&v->ctl->host_beat, __ATOMIC_RELAXED);
	uint64_t w = __atomic_load_n(&v->ctl->host, __ATOMIC_ACQUIRE), nap = MIN_NAP_NS;
	uint32_t g = __atomic_load_n(&v->ctl->guest_gen, __ATOMIC_RELAXED);

	/* Different from whatever the daemon served last, and never 0. */
	v->gen = (g > CMX_IVS_GEN(w) ? g : CMX_IVS_GEN(w)) + 1;
	if (!v->gen)
		v->gen = 1;
	/* Release pairs with the daemon's acquire load of guest_gen. */
	__atomic_store_n(&v->ctl->guest_gen, v->gen, __ATOMIC_RELEASE);
	for (;;) {
		uint64_t t = now_ns();

		w = __atomic_load_n(&v->ctl->host, __ATOMIC_ACQUIRE);
		if (w == CMX_IVS_WORD(CMX_IVS_READY, v->gen))
			break;
		__atomic_fetch_add(&v->ctl->guest_beat, 1, __ATOMIC_RELAXED);
		if ((t - start > NO_DAEMON_MS * 1000000ull &&
		     __atomic_load_n(&v->ctl->host_beat, __ATOMIC_RELAXED) == beat0) ||
		    t - start > READY_MS * 1000000ull)
			return -ECONNREFUSED;
		nap_ns(nap);
		if ((nap *= 2) > MAX_NAP_NS)
			nap = MAX_NAP_NS;
	}
	v->seen = __atomic_load_n(&v->ctl->host_beat, __ATOMIC_RELAXED);
	v->seen_ns = now_ns();
	__atomic_store_n(&owner, getpid(), __ATOMIC_RELAXED);
	remember(v->ctl, NULL);
	return 0;
}

static void *beat_main(void *arg)
{
	struct cmx_givs *v = arg;

	pthread_mutex_lock(&v->lock);
	while (!v->stop) {
		struct timespec ts;

		__atomic_fetch_add(&v->ctl->guest_beat, 1, __ATOMIC_RELAXED);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += BEAT_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&v->cond, &v->lock, &ts);
	}
	pthread_mutex_unlock(&v->lock);
	return NULL;
}

static int beat_start(struct cmx_givs *v)
{
	pthread_condattr_t ca;
	int e;

	pthread_mutex_init(&v->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&v->cond, &ca);
	pthread_condattr_destroy(&ca);
	e = pthread_create(&v->beat, NULL, beat_main, v);
	v->beating = !e;
	return -e;
}

int cmx_givs_open(const char *spec, struct cmx_givs *v)
{
	const char *path = spec + strlen("ivshmem");
	int64_t poll_us = cmx_env()->ivshmem_poll_us;
	char found[320];
	int e;

	memset(v, 0, sizeof(*v));
	v->fd = -1;
	v->max_nap_ns = poll_us == CMX_ENV_AUTO ? MAX_NAP_NS : (uint64_t)poll_us * 1000ull;
	v->spin_ns = SPIN_US * 1000ull;
	if (*path == ':')
		path++;
	if (!*path) {
		if (cmx_givs_discover(found, sizeof(found))) {
			cmx_err("ivshmem: no ivshmem device (PCI %04x:%04x) holds a clmux region",
				CMX_IVS_PCI_VENDOR, CMX_IVS_PCI_DEVICE);
			return -ENOENT;
		}
		path = found + strlen("ivshmem:");
	}
	e = map_region(path, v);
	if (e) {
		cmx_err("ivshmem: %s: %s", path,
			e == -ENODEV ? "no clmux region (is clmuxd serving it?)" : strerror(-e));
		return e;
	}
	e = take_slot(v);
	if (!e)
		e = handshake(v);
	if (!e)
		e = beat_start(v);
	if (e) {
		cmx_err("ivshmem: %s: %s", path,
			e == -EBUSY	   ? "every slot is in use by other processes"
			: e == -ECONNREFUSED ? "clmuxd does not answer on this region"
					     : strerror(-e));
		munmap(v->map, v->size);
		close(v->fd);
		v->map = NULL;
		v->fd = -1;
	}
	return e;
}

void cmx_givs_close(struct cmx_givs *v)
{
	if (!v->map)
		return;
	if (v->beating) {
		pthread_mutex_lock(&v->lock);
		v->stop = 1;
		pthread_cond_signal(&v->cond);
		pthread_mutex_unlock(&v->lock);
		pthread_join(v->beat, NULL);
		v->beating = 0;
	}
	/* 0: no session wanted; the daemon ends ours at its next poll. */
	__atomic_store_n(&v->ctl->guest_gen, 0, __ATOMIC_RELEASE);
	remember(NULL, v->ctl);
	munmap(v->map, v->size);
	close(v->fd); /* and with it the slot's lock */
	v->map = NULL;
	v->fd = -1;
}
