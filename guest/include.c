// SPDX-License-Identifier: MIT
// "-I DIR" in build options names a directory of the guest: its header files
// travel to the daemon (IncludeFiles) and the option names them there.
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "icd.h"
#include "mayprint.h"
#include "program.h"
#include "log.h"

/* What one directory may bring (docs/compatibility.md): a header may be as
 * large as all of them together. Past a limit the build fails with
 * CL_OUT_OF_RESOURCES rather than compile without a header it may need. */
#define INC_MAX_DIRS 64
#define INC_MAX_FILES 4096
#define INC_MAX_TOTAL (64u << 20)
#define INC_MAX_DEPTH 8
#define INC_MAX_NAME 1024

/* What a directory brings: IncludeFiles' payload, each path and each
 * file's bytes malloc'd. */
struct walk {
	struct cmx_IncludeFile *files;
	size_t nfiles, total;
	int truncated, oom;
};

static void walk_fini(struct walk *w)
{
	for (size_t i = 0; i < w->nfiles; i++) {
		free((void *)w->files[i].path.ptr);
		free((void *)w->files[i].data.ptr);
	}
	free(w->files);
}

/* Files a kernel may include: headers and OpenCL C sources. */
static int header_like(const char *name)
{
	static const char *const ext[] = {".h", ".hpp", ".hh", ".hxx", ".cl", ".clh", ".inc",
					  ".def"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(ext) / sizeof(*ext); i++) {
		size_t k = strlen(ext[i]);
		if (n > k && !strcmp(name + n - k, ext[i]))
			return 1;
	}
	return 0;
}

static void file_add(struct walk *w, const char *path, const char *rel, size_t size)
{
	FILE *f;
	char *data, *name;

	if (w->nfiles >= INC_MAX_FILES || size > INC_MAX_TOTAL - w->total ||
	    strlen(rel) > INC_MAX_NAME) {
		w->truncated = 1;
		return;
	}
	if (!w->files && !(w->files = calloc(INC_MAX_FILES, sizeof(*w->files)))) {
		w->oom = 1;
		return;
	}
	f = fopen(path, "rbe");
	data = malloc(size ? size : 1);
	name = strdup(rel);
	if (!data || !name)
		w->oom = 1;
	if (f && data && name && fread(data, 1, size, f) == size) {
		w->files[w->nfiles++] = (struct cmx_IncludeFile){
		    .path = {name, strlen(name)},
		    .data = {data, size},
		};
		w->total += size;
	} else {
		free(data);
		free(name);
	}
	if (f)
		fclose(f);
}

static void dir_walk(struct walk *w, const char *dir, const char *rel, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX], sub[INC_MAX_NAME + 256];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* A path of PATH_MAX bytes or more: no compiler opens it
		 * (ENAMETOOLONG), natively either, so it is not there. */
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
		    (int)sizeof(sub)) {
			/* A name the daemon could not take (CMX_INCDIR_MAX_NAME). */
			w->truncated |= header_like(de->d_name);
			continue;
		}
		if (stat(path, &st))
			continue;
		if (S_ISDIR(st.st_mode) && depth < INC_MAX_DEPTH)
			dir_walk(w, path, sub, depth + 1);
		else if (S_ISREG(st.st_mode) && header_like(de->d_name))
			file_add(w, path, sub, (size_t)st.st_size);
	}
	closedir(d);
}

/* One token of the options: [*s, end), and its text unquoted into out. */
static const char *token(const char *s, char *out, size_t outsz)
{
	size_t n = 0;
	int quoted = 0;

	for (; *s && (quoted || (*s != ' ' && *s != '\t' && *s != '\n')); s++) {
		if (*s == '"') {
			quoted = !quoted;
			continue;
		}
		if (*s == '\\' && s[1])
			s++;
		if (n + 1 < outsz)
			out[n++] = *s;
	}
	out[n] = '\0';
	return s;
}

/* Ships directory k's headers for program p. */
static cl_int dir_send(cl_program p, unsigned k, const char *dir)
{
	struct cmx_IncludeFiles_in in = {.program = {p->id}, .dir = k};
	struct cmx_IncludeFiles_bulk bulk;
	struct walk w = {0};
	cl_int e;

	/* A directory whose name is PATH_MAX bytes or more holds nothing a
	 * compiler can open: it goes as an empty one. */
	if (strlen(dir) < PATH_MAX)
		dir_walk(&w, dir, "", 0);
	if (w.truncated) {
		cmx_warn("-I %s: more headers than clmux ships (%u files, %u bytes in all, names of "
			 "%u bytes): CL_OUT_OF_RESOURCES",
			 dir, INC_MAX_FILES, INC_MAX_TOTAL, INC_MAX_NAME);
		walk_fini(&w);
		return CL_OUT_OF_RESOURCES;
	}
	bulk.files = (struct cmx_IncludeFile_array){w.files, w.nfiles};
	e = w.oom ? CL_OUT_OF_HOST_MEMORY : CMX_SEND(IncludeFiles, &in, &bulk);
	/* The daemon looks for printf in the headers too (guest/kernel.c),
	 * file by file, in names and contents. */
	for (size_t i = 0; !e && i < w.nfiles; i++)
		if (cmx_may_print(w.files[i].path.ptr, w.files[i].path.len) ||
		    cmx_may_print(w.files[i].data.ptr, w.files[i].data.len))
			p->may_print = 1;
	walk_fini(&w);
	return e;
}

cl_int cmx_include_prepare(cl_program p, const char *opts, char **wire)
{
	struct cmx_buf out;
	unsigned k = 0;
	const char *s = opts;
	/* A token is never longer than the options: none is cut. */
	size_t cap = strlen(opts) + 1;
	char *path = malloc(cap);
	cl_int e = CL_SUCCESS;

	if (!path)
		return CL_OUT_OF_HOST_MEMORY;
	cmx_buf_init(&out);
	while (*s && !e) {
		const char *start = s, *end;

		if (*s == ' ' || *s == '\t' || *s == '\n') {
			cmx_buf_put(&out, s++, 1);
			continue;
		}
		end = token(s, path, cap);
		if (strncmp(start, "-I", 2)) {
			cmx_buf_put(&out, start, (size_t)(end - start));
			s = end;
			continue;
		}
		if (end - start == 2) {
			/* "-I DIR": the directory is the next token. */
			while (*end == ' ' || *end == '\t' || *end == '\n')
				end++;
			if (!*end) {
				cmx_buf_put(&out, start, 2);
				s = end;
				continue;
			}
			end = token(end, path, cap);
		} else {
			memmove(path, path + 2, strlen(path + 2) + 1);
		}
		/* Every -I names a guest directory: even one the guest lacks
		 * becomes an empty one, never a path of the host. */
		if (k >= INC_MAX_DIRS) {
			e = CL_INVALID_BUILD_OPTIONS;
			break;
		}
		{
			char t[48];
			snprintf(t, sizeof(t), "-I cmx-include:%u", k);
			cmx_buf_put(&out, t, strlen(t));
		}
		e = dir_send(p, k++, path);
		s = end;
	}
	free(path);
	cmx_buf_put(&out, "", 1);
	if (!e && out.oom)
		e = CL_OUT_OF_HOST_MEMORY;
	if (e) {
		cmx_buf_fini(&out);
		return e;
	}
	*wire = (char *)out.data;
	return CL_SUCCESS;
}
