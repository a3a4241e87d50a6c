# An emulated cluster on one machine (sourced; root, Debian's iproute2 and iptables): N node
# namespaces on a bridge, each with its own address and hostname, links shaped per node.
# docs/mpi.md, "Trying a cluster on one machine", uses it as a recipe:
#
#   . tests/nodes.sh
#   nodes_up 2 /tmp/cluster        # namespaces <prefix>-1, -2 and the bridge's, addresses
#                                  # 198.18.0.1, .2 (RFC 2544's benchmark range: no route out)
#   link_rate 1 1gbit; link_loss 2 0.05; link_cut 2; link_restore 2
#   node_run 1 mpiexec.hydra $NODES_HYDRA -n 2 -ppn 1 ... bin/cf-train ...
#   nodes_down                     # every namespace, link, rule and process gone
#
# The nodes' only links are their veth pairs to the bridge, with no default route: no packet
# can leave them.  netem (delay) is used when the kernel has it; this one has not, so links
# are shaped by rate (tc tbf), random loss (iptables' statistic match) and cuts (a link down).
NODES_PREFIX=${NODES_PREFIX:-cfn$$}
NODES_N=0
NODES_DIR=""

# the ssh stand-in both launchers call: `nsexec [ssh options] HOST COMMAND...` runs COMMAND in
# HOST's namespace (by address or name), under its own hostname (a UTS namespace)
nodes_write_launcher() {
    cat > "$NODES_DIR/nsexec" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case \$host in 198.18.0.*) n=\${host##*.} ;; node*) n=\${host#node} ;; *) echo "nsexec: unknown node \$host" >&2; exit 255 ;; esac
exec ip netns exec $NODES_PREFIX-\$n unshare --uts sh -c "hostname node\$n; \$*"
EOF
    chmod +x "$NODES_DIR/nsexec"
}

# nodes_up N DIR: N nodes, the launcher script in DIR; NODES_HYDRA and NODES_OMPI hold the
# two launchers' options to start a job across them over TCP
nodes_up() {
    NODES_N=$1; NODES_DIR=$2
    mkdir -p "$NODES_DIR" || return 1
    ip netns add "$NODES_PREFIX-br" && ip netns exec "$NODES_PREFIX-br" ip link add br0 type bridge &&
        ip netns exec "$NODES_PREFIX-br" ip link set br0 up && ip netns exec "$NODES_PREFIX-br" ip link set lo up || return 1
    i=1
    while [ $i -le "$NODES_N" ]; do
        ns=$NODES_PREFIX-$i
        ip netns add "$ns" && ip link add "v$NODES_PREFIX$i" netns "$ns" type veth peer name "p$i" netns "$NODES_PREFIX-br" &&
        ip netns exec "$ns" ip link set "v$NODES_PREFIX$i" name eth0 && ip netns exec "$ns" ip addr add "198.18.0.$i/24" dev eth0 &&
        ip netns exec "$ns" ip link set eth0 up && ip netns exec "$ns" ip link set lo up &&
        ip netns exec "$NODES_PREFIX-br" ip link set "p$i" master br0 && ip netns exec "$NODES_PREFIX-br" ip link set "p$i" up || return 1
        i=$((i + 1))
    done
    nodes_write_launcher
    hosts=$(i=1; while [ $i -le "$NODES_N" ]; do printf '%s198.18.0.%d' "$([ $i -gt 1 ] && echo ,)" $i; i=$((i + 1)); done)
    # MPICH (UCX) and Open MPI would take shared memory between namespaces of one machine: TCP
    # on eth0 is said explicitly
    NODES_HYDRA="-launcher ssh -launcher-exec $NODES_DIR/nsexec -hosts $hosts -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0"
    NODES_OMPI="--allow-run-as-root --oversubscribe --mca plm_rsh_agent $NODES_DIR/nsexec -H $hosts --mca pml ob1 --mca btl tcp,self
                --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"
}
# node_run I COMMAND...: COMMAND in node I, under the hostname nodeI
node_run() { n=$1; shift; ip netns exec "$NODES_PREFIX-$n" unshare --uts sh -c "hostname node$n; exec \"\$@\"" sh "$@"; }
# the link of node I: both directions shaped at RATE (tbf; veth needs a burst of 128 kB)
link_rate() {
    ip netns exec "$NODES_PREFIX-$1" tc qdisc replace dev eth0 root tbf rate "$2" burst 128kb latency 100ms &&
    ip netns exec "$NODES_PREFIX-br" tc qdisc replace dev "p$1" root tbf rate "$2" burst 128kb latency 100ms
}
# random loss of a fraction P of node I's outgoing packets (TCP resends them)
link_loss() { ip netns exec "$NODES_PREFIX-$1" iptables -A OUTPUT -o eth0 -m statistic --mode random --probability "$2" -j DROP; }
link_cut() { ip netns exec "$NODES_PREFIX-br" ip link set "p$1" down; }
# the link back: the nodes forget the addresses they failed to resolve while it was down (a
# FAILED neighbour entry answers "No route to host" for a while after the link is back)
link_restore() {
    ip netns exec "$NODES_PREFIX-br" ip link set "p$1" up || return 1
    i=1
    while [ $i -le "$NODES_N" ]; do ip netns exec "$NODES_PREFIX-$i" ip neigh flush dev eth0; i=$((i + 1)); done
}
# everything gone: the processes in the namespaces first, then the namespaces (their links,
# queues and rules go with them)
nodes_down() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NODES_PREFIX-"); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
}
# what is left of the cluster: namespaces and processes (empty when nothing is)
nodes_left() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NODES_PREFIX-"
    [ -n "$NODES_DIR" ] && pgrep -af "$NODES_DIR" | grep -v pgrep
}
