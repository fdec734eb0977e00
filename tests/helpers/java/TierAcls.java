import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The AdminClient's ACL calls against a server with Kafka's StandardAuthorizer (the
 * connection a super user): createAcls, describeAcls with several filters, deleteAcls.
 * Facts list bindings as "TYPE:NAME:PATTERN:PRINCIPAL:HOST:OPERATION:PERMISSION", sorted,
 * only those whose resource name starts with this run's prefix.
 */
final class TierAcls {
    private TierAcls() {
    }

    static void acls(TierSupport tier) throws Exception {
        AclBinding topicRead = new AclBinding(
            new ResourcePattern(ResourceType.TOPIC, tier.name("orders"), PatternType.LITERAL),
            new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        AclBinding groupDeny = new AclBinding(
            new ResourcePattern(ResourceType.GROUP, tier.name("g-"), PatternType.PREFIXED),
            new AccessControlEntry("User:bob", "*", AclOperation.DESCRIBE, AclPermissionType.DENY));
        AclBinding noPrincipalType = new AclBinding(
            new ResourcePattern(ResourceType.TOPIC, tier.name("orders"), PatternType.LITERAL),
            new AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        try (Admin admin = tier.admin()) {
            admin.createAcls(List.of(topicRead, groupDeny)).all().get();
            TierSupport.fact("acls.create_invalid", TierAdmin.failure(() ->
                admin.createAcls(List.of(noPrincipalType)).all().get()));
            TierSupport.fact("acls.all", settled(tier, admin, AclBindingFilter.ANY, 2));
            TierSupport.fact("acls.topics", mine(tier, admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, null, PatternType.ANY),
                AccessControlEntryFilter.ANY)));
            TierSupport.fact("acls.match_group", mine(tier, admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.GROUP, tier.name("g-billing"), PatternType.MATCH),
                AccessControlEntryFilter.ANY)));
            AclBindingFilter alices = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(alices)).all().get();
            TierSupport.fact("acls.deleted", format(tier, deleted));
            TierSupport.fact("acls.after_delete", settled(tier, admin, AclBindingFilter.ANY, 1));
            admin.deleteAcls(List.of(groupDeny.toFilter())).all().get();
            TierSupport.fact("acls.after_delete_all", settled(tier, admin, AclBindingFilter.ANY, 0));
        }
    }

    /** This run's bindings matching {@code filter} once there are {@code count} (a cluster's
     *  brokers learn ACLs from etcd, a moment after the one that stored them). */
    private static String settled(TierSupport tier, Admin admin, AclBindingFilter filter, int count)
            throws InterruptedException {
        AtomicReference<Set<String>> seen = new AtomicReference<>();
        TierSupport.waitFor(count + " ACLs described", () -> {
            seen.set(mineSet(tier, admin, filter));
            return seen.get().size() == count;
        });
        return String.join(";", seen.get());
    }

    private static String mine(TierSupport tier, Admin admin, AclBindingFilter filter) {
        return String.join(";", mineSet(tier, admin, filter));
    }

    private static Set<String> mineSet(TierSupport tier, Admin admin, AclBindingFilter filter) {
        try {
            return formatted(tier, admin.describeAcls(filter).values().get());
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private static String format(TierSupport tier, Collection<AclBinding> bindings) {
        return String.join(";", formatted(tier, bindings));
    }

    private static Set<String> formatted(TierSupport tier, Collection<AclBinding> bindings) {
        return bindings.stream()
            .filter(b -> b.pattern().name().startsWith(tier.prefix))
            .map(b -> String.join(":", b.pattern().resourceType().toString(), b.pattern().name(),
                b.pattern().patternType().toString(), b.entry().principal(), b.entry().host(),
                b.entry().operation().toString(), b.entry().permissionType().toString()))
            .collect(Collectors.toCollection(TreeSet::new));
    }
}
