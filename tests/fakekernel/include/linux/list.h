#ifndef _FAKE_LIST_H
#define _FAKE_LIST_H
struct list_head { struct list_head *next, *prev; };
static inline void list_add(struct list_head *n, struct list_head *h)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}
#endif
