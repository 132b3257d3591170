/*
 * The guest's whole userspace (toolchains/runtime/guest.py links it static): load the
 * benchmark module with the parameters in /params, then reboot, which QEMU started with
 * -no-reboot turns into its exit. Anything that goes wrong is one line on the console.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	char params[4096] = "";
	int fd = open("/params", O_RDONLY);

	if (fd >= 0) {
		ssize_t n = read(fd, params, sizeof(params) - 1);

		params[n > 0 ? n : 0] = '\0';
		params[strcspn(params, "\n")] = '\0';
		close(fd);
	}
	fd = open("/sizewatch_pagebench.ko", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		printf("sizewatch-init: cannot open the module: %m\n");
	else if (syscall(SYS_finit_module, fd, params, 0) != 0)
		printf("sizewatch-init: loading the module failed: %m\n");
	else
		printf("sizewatch-init: the module returned without leaving QEMU\n");
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	return 1;
}
