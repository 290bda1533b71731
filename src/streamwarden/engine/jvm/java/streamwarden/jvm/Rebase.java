package streamwarden.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.types.Metadata;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * A plan built once, run over each micro-batch: the batch put where a placeholder stood.
 *
 * <p>A group's plan (its members' templates, their member tables, the JSON of each row) is
 * the same from one micro-batch to the next; only the batch's rows differ. Building it
 * from Python costs hundreds of calls into the JVM (0.1-0.3 s a micro-batch on two
 * cores). Instead it is built once over a placeholder with the batch's schema, and each
 * micro-batch swaps its own rows in for the placeholder's: one call, the analysed plan
 * reused as it is.
 *
 * <p>The batch's columns take the placeholder's attributes (the same ids, names, types
 * and nullability: a projection that renames, nothing else), so every reference of the
 * template binds to the batch's values. When the batch does not have exactly the
 * placeholder's columns, or the template reads the placeholder more than once (Spark's
 * analyser gives a relation read twice new ids, so a copy would go on reading the empty
 * placeholder: rows silently missing), {@link #onto} answers {@code null} and the caller
 * builds the plan afresh.
 */
public final class Rebase {
    private Rebase() {}

    /** {@code template} with {@code batch}'s rows where {@code placeholder}'s were, or null. */
    public static Dataset<Row> onto(Dataset<Row> template, Dataset<Row> placeholder, Dataset<Row> batch) {
        LogicalPlan leaf = placeholder.queryExecution().analyzed();
        LogicalPlan rows = batch.queryExecution().analyzed();
        List<Attribute> want = CollectionConverters.asJava(leaf.output());
        List<Attribute> have = CollectionConverters.asJava(rows.output());
        if (want.size() != have.size()) {
            return null;
        }
        List<NamedExpression> renamed = new ArrayList<>(want.size());
        for (int i = 0; i < want.size(); i++) {
            Attribute w = want.get(i);
            Attribute h = have.get(i);
            if (!w.name().equals(h.name()) || !w.dataType().equals(h.dataType()) || w.nullable() != h.nullable()) {
                return null;  // another schema: the template's references would not mean these columns
            }
            renamed.add(new Alias(h, w.name(), w.exprId(), w.qualifier(), Option.<Metadata>empty(),
                                  CollectionConverters.asScala(new ArrayList<String>()).toList()));
        }
        Project swapped = new Project(CollectionConverters.asScala(renamed).toList(), rows);
        LogicalPlan analyzed = template.queryExecution().analyzed();
        if (copiesOf(leaf, analyzed) != 1) {
            return null;
        }
        int[] found = {0};
        LogicalPlan plan = analyzed.transformUp(
            new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                @Override
                public boolean isDefinedAt(LogicalPlan node) {
                    return node == leaf;
                }

                @Override
                public LogicalPlan apply(LogicalPlan node) {
                    found[0]++;
                    return swapped;
                }
            });
        if (found[0] != 1) {
            return null;
        }
        return Dataset.ofRows(batch.sparkSession(), plan);
    }

    /** How many leaves of {@code plan} (its subqueries' too) read what {@code leaf} reads, under whatever ids. */
    private static int copiesOf(LogicalPlan leaf, LogicalPlan plan) {
        int copies = plan.children().isEmpty() && (plan == leaf || plan.sameResult(leaf)) ? 1 : 0;
        for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
            copies += copiesOf(leaf, child);
        }
        for (LogicalPlan subquery : CollectionConverters.asJava(plan.subqueries())) {
            copies += copiesOf(leaf, subquery);
        }
        return copies;
    }
}
