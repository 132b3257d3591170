#ifndef _FAKE_GFP_H
#define _FAKE_GFP_H
#define GFP_KERNEL 0x10u
#endif
