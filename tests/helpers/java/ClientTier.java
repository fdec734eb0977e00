import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The real Java client (kafka-clients) against the log server, one check a run, as
 * tests/integration/test_java_client_tier.py (one node) and
 * tests/cluster/test_java_client_cluster.py (3 brokers) run it. Every result is printed as
 * a line "fact NAME=VALUE" that the pytest side asserts on; the last line is "done CHECK".
 * Any exception prints its stack trace and exits with status 1.
 *
 * Usage: java ClientTier CHECK BOOTSTRAP REPLICATION_FACTOR PREFIX [GROUP_PROTOCOL]
 *   CHECK: idempotent | transactions | groups | admin | acls
 *   PREFIX: the start of every topic, group, transactional id and ACL resource it makes
 *   GROUP_PROTOCOL: classic | consumer (KIP-848), for transactions and groups
 */
public final class ClientTier {
    private ClientTier() {
    }

    public static void main(String[] args) throws Exception {
        String check = args[0];
        TierSupport tier = new TierSupport(args[1], Short.parseShort(args[2]), args[3]);
        String protocol = args.length > 4 ? args[4] : "classic";
        TierSupport.fact("client.version", AppInfoParser.getVersion());
        try {
            switch (check) {
                case "idempotent" -> TierProducers.idempotent(tier);
                case "transactions" -> TierProducers.transactions(tier, protocol);
                case "groups" -> TierGroups.groups(tier, protocol);
                case "admin" -> TierAdmin.admin(tier);
                case "acls" -> TierAcls.acls(tier);
                default -> throw new IllegalArgumentException("no check " + check);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
        System.out.println("done " + check);
        System.out.flush();
        System.exit(0);  // client threads a failed close left behind do not keep the JVM up
    }
}
