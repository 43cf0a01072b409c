// SPDX-License-Identifier: GPL-2.0
/*
 * cxlpod_cache: run a whole-cache instruction on request, for the cxlpod
 * guest tools (these instructions are privileged, CPL 0).
 *
 *   echo wbinvd   > /proc/cxlpod-cache   write back and invalidate
 *   echo wbnoinvd > /proc/cxlpod-cache   write back, keep the lines (F3 0F 09)
 *   echo invd     > /proc/cxlpod-cache   invalidate WITHOUT write-back
 *
 * The instruction runs once, on the CPU of the writing thread, with
 * preemption disabled.  Reading the file tells whether the CPU advertises
 * WBNOINVD (CPUID 0x80000008 EBX bit 9); without it F3 0F 09 executes as
 * wbinvd on hardware, and it is executed anyway (QEMU TCG decodes it).
 *
 * Only for emulated cxlpod guests: on bare metal invd discards every dirty
 * line of the CPU's caches, the kernel's own data included.
 */
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <asm/cpufeature.h>

static struct proc_dir_entry *cxlpod_cache_entry;

static int cxlpod_cache_show(struct seq_file *m, void *v)
{
	seq_puts(m, "ops: wbinvd wbnoinvd invd\n");
	seq_printf(m, "wbnoinvd_cpuid: %d\n", boot_cpu_has(X86_FEATURE_WBNOINVD));
	return 0;
}

static int cxlpod_cache_open(struct inode *inode, struct file *file)
{
	return single_open(file, cxlpod_cache_show, NULL);
}

static ssize_t cxlpod_cache_write(struct file *file, const char __user *ubuf,
				  size_t len, loff_t *ppos)
{
	char cmd[16];
	size_t n = min(len, sizeof(cmd) - 1);
	char *op;
	int cpu;

	if (copy_from_user(cmd, ubuf, n))
		return -EFAULT;
	cmd[n] = '\0';
	op = strim(cmd);

	cpu = get_cpu();
	if (!strcmp(op, "wbinvd"))
		asm volatile("wbinvd" ::: "memory");
	else if (!strcmp(op, "wbnoinvd"))
		asm volatile(".byte 0xf3, 0x0f, 0x09" ::: "memory");
	else if (!strcmp(op, "invd"))
		asm volatile("invd" ::: "memory");
	else
		cpu = -1;
	put_cpu();

	if (cpu < 0)
		return -EINVAL;
	pr_debug("cxlpod_cache: %s on cpu %d\n", op, cpu);
	return len;
}

static const struct proc_ops cxlpod_cache_ops = {
	.proc_open = cxlpod_cache_open,
	.proc_read = seq_read,
	.proc_lseek = seq_lseek,
	.proc_release = single_release,
	.proc_write = cxlpod_cache_write,
};

static int __init cxlpod_cache_init(void)
{
	cxlpod_cache_entry = proc_create("cxlpod-cache", 0600, NULL, &cxlpod_cache_ops);
	if (!cxlpod_cache_entry)
		return -ENOMEM;
	if (!boot_cpu_has(X86_FEATURE_WBNOINVD))
		pr_info("cxlpod_cache: CPU does not advertise WBNOINVD; it runs as wbinvd on hardware\n");
	return 0;
}

static void __exit cxlpod_cache_exit(void)
{
	proc_remove(cxlpod_cache_entry);
}

module_init(cxlpod_cache_init);
module_exit(cxlpod_cache_exit);
MODULE_DESCRIPTION("cxlpod: wbinvd, wbnoinvd and invd on request");
MODULE_LICENSE("GPL");
