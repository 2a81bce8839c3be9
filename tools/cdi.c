// SPDX-License-Identifier: MIT
// clmuxctl cdi: writes the Container Device Interface spec that hands a
// container one tenant's socket and the ICD (podman --device clmux.dev/gpu=T).
#define _GNU_SOURCE
#include "cdi.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json.h>
#include <limits.h>
#include <stdarg.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CDI_DEFAULT "/var/run/cdi/clmux.json"
#define CDI_KIND    "clmux.dev/gpu"
/* The oldest version that holds what the spec uses (env, mounts, spec-wide
 * edits): podman 4.3 (Debian 12) reads 0.3.0 to 0.5.0, containerd 1.7 and
 * CRI-O read it too. */
#define CDI_VERSION "0.3.0"
/* Where a container finds them: the socket where the ICD looks by default
 * (guest/dial.h), the ICD and its libraries in a directory of their own
 * (libclmux.so's RUNPATH is $ORIGIN), so nothing of the image is hidden. */
#define IN_SOCKET   "/run/clmux/clmuxd.sock"
#define IN_LIBDIR   "/usr/lib/clmux"
#define IN_VENDORS  "/etc/OpenCL/vendors/clmux.icd"
#define MAX_DEVICES 1024
#define MAX_LIBS    32

struct device {
	char *tenant;
	char *socket;
};

struct lib {
	char soname[128];
	char path[PATH_MAX];
};

static int say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int say(const char *fmt, ...)
{
	va_list ap;

	fputs("clmuxctl: cdi: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* CDI's rule for a device name: letters, digits, '-', '_', '.', ':',
 * beginning and ending with a letter or digit. */
static int cdi_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("-_.:", s[i]))
			return 0;
	return 1;
}

/*
 * A socket a runtime can bind-mount: an absolute path, with no ".."
 * (which a runtime resolves differently), that is a socket file now (not a
 * symbolic link, which would be followed at each container's start).
 */
static int socket_ok(const char *tenant, const char *path)
{
	struct stat st;

	if (path[0] != '/' || strstr(path, "/../") || strstr(path, "/./") || strpbrk(path, "\n\r"))
		return say("tenant %s: its listener unix:%s is not an absolute, plain path: a "
			   "container can mount only a socket file named that way",
			   tenant, path);
	if (lstat(path, &st))
		return say("tenant %s: its listener unix:%s: %s", tenant, path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return say("tenant %s: its listener unix:%s is not a socket file (%s): a "
			   "container can mount only the socket itself",
			   tenant, path, S_ISLNK(st.st_mode) ? "a symbolic link" : "another kind");
	return 0;
}

/* The daemon's listeners: one device per tenant with a unix listener (its
 * first). 0, or 1 after saying why. */
static int devices_get(const char *admin, struct device *dev, unsigned *ndev)
{
	char *answer, *line, *save = NULL;
	int e = 0, first = 1;

	*ndev = 0;
	if (cmx_ctl_ask(admin, "listeners", &answer))
		return 1;
	for (line = strtok_r(answer, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char kind[16], tenant[128];
		int off = 0;
		unsigned i;

		/* KIND TENANT ADDRESS, the address last: it may hold spaces. */
		if (first) {
			first = 0;
			continue;
		}
		if (sscanf(line, "%15s %127s %n", kind, tenant, &off) != 2 || !off) {
			e = say("unexpected line from clmuxd: %s", line);
			break;
		}
		if (strcmp(kind, "unix") || !strcmp(tenant, "-"))
			continue;
		for (i = 0; i < *ndev && strcmp(dev[i].tenant, tenant); i++)
			;
		if (i < *ndev)
			continue;
		if (!cdi_name_ok(tenant)) {
			e = say("tenant '%s' cannot be a CDI device name (" CDI_KIND "=%s): a name "
				"must begin and end with a letter or digit; rename the tenant",
				tenant, tenant);
			break;
		}
		if ((e = socket_ok(tenant, line + off)))
			break;
		if (*ndev == MAX_DEVICES) {
			e = say("more than %d tenants with a unix listener", MAX_DEVICES);
			break;
		}
		dev[*ndev].tenant = strdup(tenant);
		dev[*ndev].socket = strdup(line + off);
		if (!dev[*ndev].tenant || !dev[*ndev].socket) {
			e = say("out of memory");
			break;
		}
		(*ndev)++;
	}
	free(answer);
	return e;
}

/* glibc's own libraries come from the image: two C libraries in one
 * process do not work. */
static int from_image(const char *soname)
{
	static const char *const glibc[] = {
	    "libc.so",	    "libm.so",	  "libpthread.so", "libdl.so",	 "librt.so",  "ld-linux",
	    "libresolv.so", "libutil.so", "libanl.so",	   "linux-vdso", "libmvec.so"};

	for (unsigned i = 0; i < sizeof(glibc) / sizeof(glibc[0]); i++)
		if (!strncmp(soname, glibc[i], strlen(glibc[i])))
			return 1;
	return 0;
}

/*
 * The ICD and every library it needs that the image may lack (OpenSSL,
 * LZ4), as this host's loader resolves them: the ICD is loaded, never
 * called, and its DT_NEEDED entries are followed through the loaded maps.
 */
static int icd_libraries(const char *icd, struct lib *libs, unsigned *nlibs)
{
	void *h = dlopen(icd, RTLD_LAZY | RTLD_LOCAL);
	struct link_map *maps[MAX_LIBS];
	unsigned n = 0;

	if (!h)
		return say("cannot load the ICD %s: %s (--icd names it)", icd, dlerror());
	if (dlinfo(h, RTLD_DI_LINKMAP, &maps[0]) || !realpath(maps[0]->l_name, libs[0].path))
		return say("cannot resolve the ICD %s", icd);
	strcpy(libs[0].soname, "libclmux.so");
	*nlibs = 1;
	for (n = 0; n < *nlibs; n++) {
		const struct link_map *lm = maps[n];
		const ElfW(Dyn) * d;
		const char *strtab = NULL;

		for (d = lm->l_ld; d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_STRTAB)
				/* The loader relocated it in place, except
				 * where the dynamic section is read-only. */
				strtab = (const char *)(d->d_un.d_ptr < lm->l_addr
							    ? lm->l_addr + d->d_un.d_ptr
							    : d->d_un.d_ptr);
		for (d = lm->l_ld; strtab && d->d_tag != DT_NULL; d++) {
			const char *need = strtab + d->d_un.d_val;
			unsigned i;
			void *dh;

			if (d->d_tag != DT_NEEDED || from_image(need))
				continue;
			for (i = 0; i < *nlibs && strcmp(libs[i].soname, need); i++)
				;
			if (i < *nlibs)
				continue;
			if (*nlibs == MAX_LIBS || strlen(need) >= sizeof(libs[0].soname))
				return say("the ICD needs too many libraries");
			/* Loaded already, as the ICD's dependency. */
			dh = dlopen(need, RTLD_LAZY | RTLD_NOLOAD);
			if (!dh || dlinfo(dh, RTLD_DI_LINKMAP, &maps[*nlibs]) ||
			    !realpath(maps[*nlibs]->l_name, libs[*nlibs].path))
				return say("cannot resolve %s, which the ICD needs", need);
			strcpy(libs[*nlibs].soname, need);
			(*nlibs)++;
		}
	}
	return 0;
}

/* Adds v to the container c (an object where key is set, else an array);
 * where either is missing (out of memory) or the add fails, drops v and
 * marks *oom. */
static void put(struct json_object *c, const char *key, struct json_object *v, int *oom)
{
	int e = !c || !v || (key ? json_object_object_add(c, key, v) : json_object_array_add(c, v));

	if (e) {
		json_object_put(v);
		*oom = 1;
	}
}

static struct json_object *mount(const char *host, const char *in, const char *const *opts,
				 int *oom)
{
	struct json_object *m = json_object_new_object(), *o = json_object_new_array();

	put(m, "hostPath", json_object_new_string(host), oom);
	put(m, "containerPath", json_object_new_string(in), oom);
	for (; *opts; opts++)
		put(o, NULL, json_object_new_string(*opts), oom);
	put(m, "options", o, oom);
	return m;
}

/* The spec as a runtime reads it; NULL when memory is short. */
static struct json_object *spec_make(const struct device *dev, unsigned ndev,
				     const struct lib *libs, unsigned nlibs, const char *vendors)
{
	static const char *const sock_opts[] = {"nosuid", "nodev", "noexec", "bind", NULL};
	static const char *const lib_opts[] = {"ro", "nosuid", "nodev", "bind", NULL};
	static const char *const file_opts[] = {"ro", "nosuid", "nodev", "noexec", "bind", NULL};
	struct json_object *spec = json_object_new_object(), *devs = json_object_new_array();
	struct json_object *edits = json_object_new_object(), *env = json_object_new_array();
	struct json_object *mounts = json_object_new_array();
	int oom = 0;

	put(spec, "cdiVersion", json_object_new_string(CDI_VERSION), &oom);
	put(spec, "kind", json_object_new_string(CDI_KIND), &oom);
	for (unsigned i = 0; i < ndev; i++) {
		struct json_object *d = json_object_new_object(), *e = json_object_new_object();
		struct json_object *m = json_object_new_array();
		put(d, "name", json_object_new_string(dev[i].tenant), &oom);
		/* The tenant's socket, and no other: whoever reaches it is
		 * that tenant, whatever the container says. */
		put(m, NULL, mount(dev[i].socket, IN_SOCKET, sock_opts, &oom), &oom);
		put(e, "mounts", m, &oom);
		put(d, "containerEdits", e, &oom);
		put(devs, NULL, d, &oom);
	}
	put(spec, "devices", devs, &oom);
	/* Every device: the ICD where the image's loader looks, over the shm
	 * transport (rings in a memfd the daemon passes on the socket). */
	put(env, NULL, json_object_new_string("CLMUX_SERVER=shm:" IN_SOCKET), &oom);
	put(edits, "env", env, &oom);
	for (unsigned i = 0; i < nlibs; i++) {
		char in[sizeof(IN_LIBDIR "/") + sizeof(libs[i].soname)];
		snprintf(in, sizeof(in), IN_LIBDIR "/%.127s", libs[i].soname);
		put(mounts, NULL, mount(libs[i].path, in, lib_opts, &oom), &oom);
	}
	put(mounts, NULL, mount(vendors, IN_VENDORS, file_opts, &oom), &oom);
	put(edits, "mounts", mounts, &oom);
	put(spec, "containerEdits", edits, &oom);
	if (oom) {
		json_object_put(spec);
		return NULL;
	}
	return spec;
}

static int spec_write(FILE *f, const struct device *dev, unsigned ndev, const struct lib *libs,
		      unsigned nlibs, const char *vendors)
{
	struct json_object *spec = spec_make(dev, ndev, libs, nlibs, vendors);
	const char *text = spec ? json_object_to_json_string_ext(
				      spec, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_PRETTY_TAB |
						JSON_C_TO_STRING_NOSLASHESCAPE)
				: NULL;
	int e = 0;

	/* A write error shows at temp_close() (ferror). */
	if (text)
		fprintf(f, "%s\n", text);
	else
		e = say("out of memory; nothing written");
	json_object_put(spec);
	return e;
}

/* Writes path by a temporary file in its directory, renamed over it once
 * complete: a runtime reading the directory sees the old file or the new
 * one. Returns the open temporary (its name in tmp) or NULL (said). */
static FILE *temp_open(const char *path, char *tmp, size_t len)
{
	int fd;
	FILE *f;

	snprintf(tmp, len, "%s.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		say("cannot write in the directory of %s: %s; nothing written", path,
		    strerror(errno));
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f || fchmod(fd, 0644)) {
		say("%s: %s; nothing written", tmp, strerror(errno));
		if (f)
			fclose(f);
		else
			close(fd);
		unlink(tmp);
		return NULL;
	}
	return f;
}

static int temp_close(FILE *f, const char *tmp)
{
	int e = fflush(f) || ferror(f) || fsync(fileno(f));

	e = fclose(f) || e;
	if (e) {
		say("%s: %s; nothing written", tmp, strerror(errno));
		unlink(tmp);
	}
	return e;
}

static int generate(const char *admin, const char *out, const char *icd, int list)
{
	static struct device dev[MAX_DEVICES];
	struct lib libs[MAX_LIBS];
	char dir[PATH_MAX], vendors[PATH_MAX], tspec[PATH_MAX + 8], tvend[PATH_MAX + 8];
	unsigned ndev = 0, nlibs = 0;
	struct stat st;
	const char *slash = strrchr(out, '/');
	size_t base;
	FILE *f;
	int e;

	if ((e = devices_get(admin, dev, &ndev)))
		goto out;
	if (list) {
		for (unsigned i = 0; i < ndev; i++)
			printf("%s=%-16s %s\n", CDI_KIND, dev[i].tenant, dev[i].socket);
		goto out;
	}
	e = 1;
	/* Nothing to offer is more likely a daemon started without its
	 * tenants' listeners than an intent: the spec stays as it was. */
	if (!ndev) {
		say("no tenant has a unix listener (--listen unix:PATH,tenant=NAME); nothing "
		    "written");
		goto out;
	}
	/* A runtime reads only .json and .yaml files of its spec directories,
	 * and would not read this one as YAML. */
	base = strlen(out) - 5;
	if (strlen(out) < 6 || strcmp(out + base, ".json") || out[base - 1] == '/') {
		say("%s: the spec's name must end in .json; nothing written", out);
		goto out;
	}
	/* The vendors file, beside the spec (runtimes skip .icd files). */
	snprintf(vendors, sizeof(vendors), "%.*s.icd", (int)base, out);
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
	if (!dir[0])
		strcpy(dir, "/");
	if (!stat(dir, &st) && !S_ISDIR(st.st_mode)) {
		say("cannot write in %s: not a directory; nothing written", dir);
		goto out;
	}
	if (access(dir, W_OK)) {
		/* A runtime's own directory may not exist yet (/var/run is a
		 * tmpfs); any other must. */
		if (errno != ENOENT || (strcmp(dir, "/var/run/cdi") && strcmp(dir, "/etc/cdi")) ||
		    mkdir(dir, 0755)) {
			say("cannot write in %s: %s; nothing written", dir, strerror(errno));
			goto out;
		}
	}
	if (icd_libraries(icd, libs, &nlibs))
		goto out;
	if (!(f = temp_open(vendors, tvend, sizeof(tvend))))
		goto out;
	fputs(IN_LIBDIR "/libclmux.so\n", f);
	if (temp_close(f, tvend))
		goto out;
	if (!(f = temp_open(out, tspec, sizeof(tspec)))) {
		unlink(tvend);
		goto out;
	}
	if (spec_write(f, dev, ndev, libs, nlibs, vendors)) {
		fclose(f);
		unlink(tspec);
		unlink(tvend);
		goto out;
	}
	if (temp_close(f, tspec)) {
		unlink(tvend);
		goto out;
	}
	if (rename(tvend, vendors) || rename(tspec, out)) {
		say("renaming into %s: %s", dir, strerror(errno));
		unlink(tvend);
		unlink(tspec);
		goto out;
	}
	printf("%s: %u device%s (%s=NAME)\n", out, ndev, ndev == 1 ? "" : "s", CDI_KIND);
	e = 0;
out:
	for (unsigned i = 0; i < ndev; i++) {
		free(dev[i].tenant);
		free(dev[i].socket);
	}
	return e;
}

int cmx_cdi_main(const char *admin, int json, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"icd", required_argument, NULL, 'i'},
	    {NULL, 0, NULL, 0},
	};
	const char *out = CDI_DEFAULT, *icd = CMX_LIBDIR "/libclmux.so";
	int opt, list;

	if (argc < 2 || (strcmp(argv[1], "generate") && strcmp(argv[1], "list")))
		return say("expected 'cdi generate [--output PATH] [--icd PATH]' or 'cdi list'");
	if (json)
		return say("no --json form");
	list = !strcmp(argv[1], "list");
	optind = 2;
	while ((opt = getopt_long(argc, argv, "o:i:", opts, NULL)) != -1) {
		if (opt == 'o' && !list)
			out = optarg;
		else if (opt == 'i' && !list)
			icd = optarg;
		else
			return say("cdi %s: unknown option", argv[1]);
	}
	if (optind != argc)
		return say("cdi %s: unexpected argument '%s'", argv[1], argv[optind]);
	return generate(admin, out, icd, list);
}
