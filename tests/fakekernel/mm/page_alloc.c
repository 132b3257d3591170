#include <linux/list.h>
#include <linux/gfp.h>

struct list_head free_list = { &free_list, &free_list };

static inline int rmqueue_smallest(unsigned int order)
{
	return (int)order * 3 + 1;
}

int alloc_pages(unsigned int gfp, unsigned int order)
{
	if (!(gfp & GFP_KERNEL))
		return -1;
	return rmqueue_smallest(order);
}
