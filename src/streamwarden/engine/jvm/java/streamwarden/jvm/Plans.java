package streamwarden.jvm;

import java.util.Set;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;

import scala.jdk.javaapi.CollectionConverters;

/** Questions about a plan that Python would need hundreds of calls into the JVM to ask. */
public final class Plans {
    private Plans() {}

    /**
     * Logical operators that keep state across micro-batches when their input streams (a join
     * is counted whatever its sides: a stream-static join only costs a caller its caution).
     */
    private static final Set<String> STATEFUL = Set.of(
        "Aggregate", "FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState", "TransformWithState",
        "TransformWithStateInPySpark", "Deduplicate", "DeduplicateWithinWatermark", "Join", "GlobalLimit",
        "LocalLimit", "Sort");

    /**
     * Whether {@code frame}'s plan holds an operator with state (its Security Shield, an
     * aggregate, a join...). A micro-batch of such a query must run every one of them, or Spark
     * refuses to commit the batch; a stateless query's batch may be read by plans that fold to
     * nothing.
     */
    public static boolean stateful(Dataset<Row> frame) {
        return stateful(frame.queryExecution().analyzed());
    }

    private static boolean stateful(LogicalPlan plan) {
        if (STATEFUL.contains(plan.nodeName())) {
            return true;
        }
        for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
            if (stateful(child)) {
                return true;
            }
        }
        return false;
    }
}
