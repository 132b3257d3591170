#include <linux/list.h>

struct list_head slabs = { &slabs, &slabs };

void slab_add(struct list_head *n)
{
	list_add(n, &slabs);
}
