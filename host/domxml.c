// SPDX-License-Identifier: MIT
// Reads a libvirt domain's name, UUID and <clmux:gpu> element (libxml2).
#include "domxml.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

static int copy(char *to, size_t cap, const xmlChar *s)
{
	size_t n = s ? strlen((const char *)s) : 0;

	if (!s || n >= cap)
		return -EINVAL;
	memcpy(to, s, n + 1);
	return 0;
}

static xmlNode *child(xmlNode *n, const char *name)
{
	for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && !strcmp((const char *)c->name, name) && !c->ns)
			return c;
	return NULL;
}

static int read_gpu(xmlNode *e, struct cmx_domxml *d, char *why, size_t whylen)
{
	for (xmlAttr *a = e->properties; a; a = a->next) {
		xmlChar *v;
		int bad;
		if (d->nattrs == CMX_DOMXML_ATTRS) {
			snprintf(why, whylen, "more than %d attributes", CMX_DOMXML_ATTRS);
			return -EINVAL;
		}
		v = xmlNodeListGetString(e->doc, a->children, 1);
		bad = copy(d->key[d->nattrs], CMX_DOMXML_VALUE, a->name) ||
		      copy(d->value[d->nattrs], CMX_DOMXML_VALUE, v ? v : (const xmlChar *)"");
		xmlFree(v);
		if (bad) {
			snprintf(why, whylen, "attribute '%.32s' too long (at most %d bytes)",
				 (const char *)a->name, CMX_DOMXML_VALUE - 1);
			return -EINVAL;
		}
		d->nattrs++;
	}
	d->has_gpu = 1;
	return 0;
}

int cmx_domxml_parse(const char *xml, size_t len, struct cmx_domxml *d, char *why, size_t whylen)
{
	xmlDoc *doc;
	xmlNode *root, *n;
	xmlChar *s;
	int e = -EINVAL;

	memset(d, 0, sizeof(*d));
	if (len > INT_MAX) {
		snprintf(why, whylen, "domain XML too large");
		return -EINVAL;
	}
	/* No network, no entities expanded, no DTD loaded: the text is the
	 * domain's owner's as much as libvirt's. */
	doc = xmlReadMemory(xml, (int)len, "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		snprintf(why, whylen, "not well-formed XML");
		return -EINVAL;
	}
	root = xmlDocGetRootElement(doc);
	if (!root || strcmp((const char *)root->name, "domain")) {
		snprintf(why, whylen, "not a <domain> document");
		goto out;
	}
	n = child(root, "name");
	s = n ? xmlNodeGetContent(n) : NULL;
	if (copy(d->name, sizeof(d->name), s)) {
		xmlFree(s);
		snprintf(why, whylen, "no <name>, or one too long");
		goto out;
	}
	xmlFree(s);
	e = 0;
	for (xmlNode *c = (n = child(root, "metadata")) ? n->children : NULL; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && c->ns && c->ns->href &&
		    !strcmp((const char *)c->ns->href, CMX_DOMXML_NS) &&
		    !strcmp((const char *)c->name, "gpu")) {
			e = read_gpu(c, d, why, whylen);
			break;
		}
	/* libvirt always gives one; a tenant is bound to it. */
	n = child(root, "uuid");
	s = n ? xmlNodeGetContent(n) : NULL;
	if (!e && d->has_gpu && (copy(d->uuid, sizeof(d->uuid), s) || strlen(d->uuid) != 36)) {
		snprintf(why, whylen, "no <uuid>, or not one");
		e = -EINVAL;
	}
	xmlFree(s);
out:
	xmlFreeDoc(doc);
	return e;
}
