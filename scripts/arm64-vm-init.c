/* A minimal initramfs /init for the arm64 test guest: loads the modules that
   put the root disk in reach (virtio-mmio, virtio-blk, ext4 and its deps)
   and the 9p host share (virtio-pci, 9pnet_virtio, 9p),
   mounts /dev/vda and hands over to its /sbin/init. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
static void load(const char *p) {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { perror(p); return; }
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) perror(p);
    close(fd);
}
int main(void) {
    mkdir("/dev", 0755); mkdir("/proc", 0755); mkdir("/newroot", 0755);
    mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
    /* the root disk (virtio-mmio), then the host share (-virtfs is virtio-9p-pci) */
    const char *mods[] = {"/m/crc32c_generic.ko", "/m/crc16.ko", "/m/mbcache.ko", "/m/jbd2.ko", "/m/ext4.ko",
                          "/m/virtio_mmio.ko", "/m/virtio_blk.ko", "/m/virtio_pci_legacy_dev.ko",
                          "/m/virtio_pci_modern_dev.ko", "/m/virtio_pci.ko", "/m/netfs.ko", "/m/fscache.ko",
                          "/m/9pnet.ko", "/m/9pnet_virtio.ko", "/m/9p.ko", 0};
    for (int i = 0; mods[i]; i++) load(mods[i]);
    for (int i = 0; i < 200 && access("/dev/vda", F_OK) != 0; i++) usleep(50000);
    if (mount("/dev/vda", "/newroot", "ext4", 0, 0) != 0) { perror("mount /dev/vda"); sleep(5); return 1; }
    mount("/dev", "/newroot/dev", 0, MS_MOVE, 0);
    if (chdir("/newroot") != 0 || mount(".", "/", 0, MS_MOVE, 0) != 0 || chroot(".") != 0 || chdir("/") != 0) {
        perror("switch root"); sleep(5); return 1;
    }
    execl("/sbin/init", "/sbin/init", (char *)0);
    perror("exec /sbin/init");
    return 1;
}
