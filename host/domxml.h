// SPDX-License-Identifier: MIT
// A libvirt domain's XML, as far as clmux reads it: name, UUID and the
// <clmux:gpu> metadata element that asks for a clmux GPU.
#ifndef CMX_HOST_DOMXML_H
#define CMX_HOST_DOMXML_H

#include <stddef.h>

/* The namespace of clmux's element in a domain's <metadata>, and the
 * prefix `virsh metadata --key` gives it. */
#define CMX_DOMXML_NS  "https://clmux.org/xmlns/libvirt/gpu/1"
#define CMX_DOMXML_KEY "clmux"

#define CMX_DOMXML_NAME	 256 /* libvirt's names are longer than tenants' */
#define CMX_DOMXML_ATTRS 16
#define CMX_DOMXML_VALUE 64

struct cmx_domxml {
	char name[CMX_DOMXML_NAME];
	char uuid[37];
	int has_gpu; /* the element is there */
	/* Its attributes, unchecked (host/libvirt.c checks them): an attribute
	 * too long or too many of them make the parse fail. */
	unsigned nattrs;
	char key[CMX_DOMXML_ATTRS][CMX_DOMXML_VALUE];
	char value[CMX_DOMXML_ATTRS][CMX_DOMXML_VALUE];
};

/* Reads a whole <domain> document (virDomainGetXMLDesc(), or a hook's
 * standard input). 0, or -EINVAL with the reason in why. */
int cmx_domxml_parse(const char *xml, size_t len, struct cmx_domxml *d, char *why, size_t whylen);

#endif
