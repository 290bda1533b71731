package streamwarden.jvm;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A count-based window {@code [ROWS n]} over a continuous input (CQL's tuple-based sliding
 * window; see streamwarden.engine.rows for the semantics and the replay form). One group holds
 * the whole stream, since the window spans all of it; the last n - 1 tuples live in Spark's
 * state store between micro-batches. Each micro-batch's tuples are taken in {@code ts} order,
 * ties in arrival order, after those of earlier micro-batches.
 *
 * <p>Input columns, in this order: {@code _t} bigint (ts, micros), {@code _a} string (the
 * arrival key), {@code _q} boolean (the tuple qualifies), {@code _args} array&lt;double&gt; (each
 * aggregate's argument; NULL: none), {@code _groups} struct (the grouping values),
 * {@code _lv} bigint (the tuple's level bits, NULL without levels), {@code _policies}
 * array&lt;string&gt; (NULL without provenance). Output per arrival and group present among the
 * window's qualifying tuples (without groups exactly one row): {@code ts}, {@code _groups},
 * {@code _aggs} array&lt;double&gt; (count, min, max, sum or avg of each argument over the
 * qualifying tuples), {@code _level} (bitwise OR of their levels), {@code _policies} (their
 * sorted union).
 */
public final class RowsWindow implements FlatMapGroupsWithStateFunction<Integer, Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final int T = 0, ARRIVAL = 1, QUALIFIES = 2, ARGS = 3, GROUPS = 4, LEVEL = 5, POLICIES = 6;

    private final int n;
    private final String[] funcs;
    private final boolean grouped;

    RowsWindow(int n, String[] funcs, boolean grouped) {
        this.n = n;
        this.funcs = funcs.clone();
        this.grouped = grouped;
    }

    /**
     * The aggregates of one group over the window, kept as the window slides: each tuple is
     * added once when it arrives and removed once when it leaves (O(log n) per tuple, not a
     * pass over the n tuples per arrival, which a user's [ROWS 1000000] would make a DoS).
     * Counts and sums subtract; MIN and MAX keep a sorted multiset; the level keeps a count
     * per bit and the policies a count per name, so an OR and a union can forget a tuple too.
     */
    private final class Accumulator {
        Row groups;
        int members;
        final long[] counts = new long[funcs.length];
        final double[] sums = new double[funcs.length];
        final List<TreeMap<Double, Integer>> sorted = new ArrayList<>();
        final int[] bits = new int[64];
        final TreeMap<String, Integer> policies = new TreeMap<>();

        Accumulator() {
            for (int k = 0; k < funcs.length; k++) {
                sorted.add(funcs[k].equals("min") || funcs[k].equals("max") ? new TreeMap<>() : null);
            }
        }

        /** Add (+1) or remove (-1) one qualifying tuple. */
        void change(Row row, int sign) {
            members += sign;
            List<Object> args = row.getList(ARGS);
            for (int k = 0; k < funcs.length; k++) {
                Object arg = args.get(k);
                if (arg == null) {
                    continue;
                }
                double x = ((Number) arg).doubleValue();
                counts[k] += sign;
                sums[k] = counts[k] == 0 ? 0.0 : sums[k] + sign * x;  // no residue once the group is empty
                if (sorted.get(k) != null) {
                    sorted.get(k).merge(x, sign, (a, b) -> a + b == 0 ? null : a + b);
                }
            }
            if (!row.isNullAt(LEVEL)) {
                long level = row.getLong(LEVEL);
                for (int b = 0; b < 64; b++) {
                    if ((level >>> b & 1L) != 0) {
                        bits[b] += sign;
                    }
                }
            }
            if (!row.isNullAt(POLICIES)) {
                for (Object name : row.getList(POLICIES)) {
                    policies.merge((String) name, sign, (a, b) -> a + b == 0 ? null : a + b);
                }
            }
        }

        Row emit(long ts, Row fallbackGroups) {
            List<Double> aggs = new ArrayList<>(funcs.length);
            for (int k = 0; k < funcs.length; k++) {
                if (funcs[k].equals("count")) {
                    aggs.add((double) counts[k]);
                } else if (counts[k] == 0) {
                    aggs.add(null);
                } else if (funcs[k].equals("min")) {
                    aggs.add(sorted.get(k).firstKey());
                } else if (funcs[k].equals("max")) {
                    aggs.add(sorted.get(k).lastKey());
                } else {
                    aggs.add(funcs[k].equals("avg") ? sums[k] / counts[k] : sums[k]);
                }
            }
            long level = 0;
            for (int b = 0; b < 64; b++) {
                if (bits[b] > 0) {
                    level |= 1L << b;
                }
            }
            return RowFactory.create(ts, groups != null ? groups : fallbackGroups, seq(aggs), level,
                seq(new ArrayList<>(policies.keySet())));
        }
    }

    private static <T> scala.collection.immutable.Seq<T> seq(List<T> list) {
        return scala.jdk.javaapi.CollectionConverters.asScala(list).toList();
    }

    /** Grouping values as a key: NULL is one group, and -0.0 is 0.0, as Spark groups them. */
    private static List<Object> key(Row groups) {
        List<Object> key = new ArrayList<>(groups.length());
        for (int i = 0; i < groups.length(); i++) {
            Object value = groups.get(i);
            if (value instanceof Double && (Double) value == 0.0) {
                value = 0.0;
            } else if (value instanceof Float && (Float) value == 0.0f) {
                value = 0.0f;
            }
            key.add(value);
        }
        return key;
    }

    @Override
    public Iterator<Row> call(Integer all, Iterator<Row> rows, GroupState<Row> state) {
        List<Row> batch = new ArrayList<>();
        rows.forEachRemaining(batch::add);
        // ts, then arrival: the arrival key compares as Python and Spark compare text (code points).
        batch.sort(Comparator.comparingLong((Row r) -> r.getLong(T))
            .thenComparing((Row r) -> r.getString(ARRIVAL), SpCode.Spark::compareText));
        List<Row> history = new ArrayList<>();
        if (state.exists()) {
            history.addAll(state.get().<Row>getList(0));
        }
        int first = history.size();  // at most n - 1: all of them are in the first arrival's window
        history.addAll(batch);
        Map<List<Object>, Accumulator> groups = new LinkedHashMap<>();
        List<Row> out = new ArrayList<>();
        for (int i = 0; i < history.size(); i++) {
            change(groups, history.get(i), 1);
            if (i - n >= 0) {
                change(groups, history.get(i - n), -1);  // it left the window
            }
            if (i < first) {
                continue;
            }
            long ts = history.get(i).getLong(T);
            if (groups.isEmpty() && !grouped) {
                out.add(new Accumulator().emit(ts, history.get(i).getStruct(GROUPS)));
            }
            for (Accumulator group : groups.values()) {
                out.add(group.emit(ts, null));
            }
        }
        int keep = Math.max(0, n - 1);
        List<Row> tail = new ArrayList<>(history.subList(Math.max(0, history.size() - keep), history.size()));
        state.update(RowFactory.create(seq(tail)));
        return out.iterator();
    }

    /** Add (+1) or remove (-1) a tuple of the window: only a qualifying one counts, in its group. */
    private void change(Map<List<Object>, Accumulator> groups, Row tuple, int sign) {
        if (tuple.isNullAt(QUALIFIES) || !tuple.getBoolean(QUALIFIES)) {
            return;
        }
        Row grouping = tuple.getStruct(GROUPS);
        List<Object> k = grouped ? key(grouping) : List.of();  // without GROUP BY: one group
        Accumulator group = groups.computeIfAbsent(k, unused -> new Accumulator());
        if (group.groups == null) {
            group.groups = grouping;
        }
        group.change(tuple, sign);
        if (group.members == 0) {
            groups.remove(k);
        }
    }

    /** {@code input} (the columns above) through one window of {@code n} tuples computing {@code funcs}. */
    public static Dataset<Row> apply(Dataset<Row> input, int n, String[] funcs, boolean grouped) {
        StructType schema = input.schema();
        StructType out = new StructType()
            .add("ts", DataTypes.LongType, false)
            .add("_groups", schema.fields()[GROUPS].dataType(), true)
            .add("_aggs", new ArrayType(DataTypes.DoubleType, true), true)
            .add("_level", DataTypes.LongType, true)
            .add("_policies", new ArrayType(DataTypes.StringType, true), true);
        StructType kept = new StructType().add("history", new ArrayType(schema, true), true);
        return input
            .groupByKey((MapFunction<Row, Integer>) row -> 0, Encoders.INT())
            .flatMapGroupsWithState(new RowsWindow(n, funcs, grouped), OutputMode.Append(), Encoders.row(kept),
                Encoders.row(out), GroupStateTimeout.NoTimeout());
    }
}
