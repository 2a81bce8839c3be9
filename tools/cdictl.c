// SPDX-License-Identifier: MIT
// clmuxctl cdi generate|list: the spec (tools/cdi.c) of the listeners a
// running clmuxd reports on its admin socket.
#include "cdi.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int say(const char *what)
{
	fprintf(stderr, "clmuxctl: cdi: %s\n", what);
	return 1;
}

int cmx_cdi_main(const char *admin, int json, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"icd", required_argument, NULL, 'i'},
	    {NULL, 0, NULL, 0},
	};
	static struct cmx_cdi_listener ls[CMX_CDI_MAX_LISTENERS];
	const char *out = CMX_CDI_DEFAULT, *icd = CMX_LIBDIR "/libclmux.so";
	char *answer, *line, *save = NULL;
	unsigned nls = 0;
	int opt, list, e, first = 1;

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
			return say(list ? "cdi list: unknown option"
					: "cdi generate: unknown option");
	}
	if (optind != argc) {
		fprintf(stderr, "clmuxctl: cdi: cdi %s: unexpected argument '%s'\n", argv[1],
			argv[optind]);
		return 1;
	}
	if (cmx_ctl_ask(admin, "listeners", &answer))
		return 1;
	for (line = strtok_r(answer, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char kind[16];
		int off = 0;

		/* KIND TENANT ADDRESS, the address last: it may hold spaces;
		 * a heading first. */
		if (first) {
			first = 0;
			continue;
		}
		if (nls == CMX_CDI_MAX_LISTENERS) {
			free(answer);
			return say("more listeners than a spec can take");
		}
		if (sscanf(line, "%15s %127s %n", kind, ls[nls].tenant, &off) != 2 || !off) {
			fprintf(stderr, "clmuxctl: cdi: unexpected line from clmuxd: %s\n", line);
			free(answer);
			return 1;
		}
		if (!strcmp(kind, "unix"))
			ls[nls++].path = line + off;
	}
	e = cmx_cdi_write(ls, nls, out, icd, list);
	free(answer);
	return e;
}
