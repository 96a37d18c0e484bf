// A tc filter (clsact, direct action) that drops DROP_PERCENT % of the
// packets an interface sends, at random: packet loss for multi_machine_test.sh
// where the kernel has neither sch_netem nor tc's gact action. Built by
// multi_machine_test.sh with `clang -target bpf -DDROP_PERCENT=N`.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#ifndef DROP_PERCENT
#define DROP_PERCENT 1
#endif

static __u32 (*random_u32)(void) = (void*)BPF_FUNC_get_prandom_u32;

__attribute__((section("tc"), used)) int drop_packets(struct __sk_buff* skb) {
  (void)skb;
  return random_u32() % 100 < DROP_PERCENT ? TC_ACT_SHOT : TC_ACT_OK;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
