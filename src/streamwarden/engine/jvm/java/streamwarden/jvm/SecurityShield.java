package streamwarden.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The Security Shield as a Spark operator: one {@link ShieldState} per provider, kept in
 * Spark's state store between micro-batches ({@code flatMapGroupsWithState}; a replay runs
 * the same function over one batch with no state).
 *
 * <p>Input columns, in this order (see streamwarden.engine.shield.reader):
 * {@code _g} string (the provider), {@code _seq} bigint, {@code _file} string, {@code _line}
 * bigint, {@code _is_sp} boolean, {@code _pts} bigint (an SP's policy ts, micros),
 * {@code _sn} int, {@code _code} string (an SP's code), {@code _tts} bigint (a tuple's
 * sp_ts, micros), {@code _tcsn} int (its sp_csn), {@code _ktext} string and {@code _knum}
 * double (the tuple's key as text, and as a number when it reads as one),
 * {@code _payload} struct (the tuple).
 *
 * <p>Output: {@code _payload} and {@code _gov}, the provider's decision for the user: NULL
 * when the shield denies the tuple, else {@code mask} (the attributes the governing SPs
 * grant: the masks of the positive SPs whose tuple pattern matches the key, minus those of
 * the negative ones), {@code grant} (the same counting only positive SPs WITH GRANT OPTION)
 * {@code immutable} (some governing SP is) and {@code policy_ts} (the governing policy's
 * timestamp, micros: what the row's provenance names). Denied tuples still leave, so the
 * event-time watermark follows every tuple.
 *
 * <p>In quarantine mode the reader passes each broken record of a provider as a marker, whose
 * {@code _code} is {@link #QUARANTINED} and whose payload is NULL: an SP marker (its policy ts
 * in {@code _pts}, NULL when unreadable) taints that policy ({@link ShieldState#onQuarantinedSp}),
 * a tuple marker acts on the state as its tuple would (its sp_ts and sp_csn), and neither
 * leaves the operator.
 */
public final class SecurityShield implements FlatMapGroupsWithStateFunction<String, Row, String, Row> {
    private static final long serialVersionUID = 1L;
    private static final int G = 0, SEQ = 1, FILE = 2, LINE = 3, IS_SP = 4, PTS = 5, SN = 6, CODE = 7, TTS = 8,
        TCSN = 9, KTEXT = 10, KNUM = 11, PAYLOAD = 12;
    /** The {@code _code} of a quarantined record's marker (no SP's code: codes are JSON objects). */
    static final String QUARANTINED = "!";
    static final StructType DECISION = new StructType()
        .add("mask", DataTypes.LongType, false)
        .add("grant", DataTypes.LongType, false)
        .add("immutable", DataTypes.BooleanType, false)
        .add("policy_ts", DataTypes.LongType, false);

    static boolean quarantined(Row row) {
        return !row.isNullAt(CODE) && row.getString(CODE).equals(QUARANTINED);
    }

    /**
     * Records in arrival order: {@code _seq} when every record of the batch has one, else file
     * then line. A quarantined record whose seq cannot be read does not change that choice
     * (a broken record must not reorder the others): it goes right after the record before it
     * in its file.
     */
    static void arrivalOrder(List<Row> batch) {
        boolean allSequenced = true, unsequencedMarkers = false;
        for (Row row : batch) {
            if (row.isNullAt(SEQ)) {
                if (!quarantined(row)) {
                    allSequenced = false;
                    break;
                }
                unsequencedMarkers = true;
            }
        }
        Comparator<Row> byPlace = Comparator.comparing((Row r) -> r.getString(FILE))
            .thenComparingLong(r -> r.getLong(LINE));
        if (!allSequenced) {
            batch.sort(byPlace);  // List.sort is stable
        } else if (!unsequencedMarkers) {
            batch.sort(Comparator.comparingLong((Row r) -> r.getLong(SEQ)));
        } else {
            batch.sort(byPlace);
            long[][] keys = new long[batch.size()][];  // (seq, or the seq before it in its file; 0 / 1 marker; index)
            String file = null;
            long before = Long.MIN_VALUE;
            for (int i = 0; i < batch.size(); i++) {
                Row row = batch.get(i);
                if (!row.getString(FILE).equals(file)) {
                    file = row.getString(FILE);
                    before = Long.MIN_VALUE;
                }
                boolean marker = row.isNullAt(SEQ);
                if (!marker) {
                    before = row.getLong(SEQ);
                }
                keys[i] = new long[] {before, marker ? 1 : 0, i};
            }
            List<Row> placed = new ArrayList<>(batch);
            Arrays.sort(keys, Comparator.comparingLong((long[] k) -> k[0]).thenComparingLong(k -> k[1])
                .thenComparingLong(k -> k[2]));
            for (int i = 0; i < keys.length; i++) {
                batch.set(i, placed.get((int) keys[i][2]));
            }
        }
    }

    @Override
    public Iterator<Row> call(String provider, Iterator<Row> rows, GroupState<String> state) {
        List<Row> batch = new ArrayList<>();
        rows.forEachRemaining(batch::add);
        arrivalOrder(batch);
        ShieldState shield = state.exists() ? ShieldState.restore(state.get()) : new ShieldState();
        List<Row> out = new ArrayList<>(batch.size());
        for (Row row : batch) {
            boolean marker = quarantined(row);
            if (row.getBoolean(IS_SP)) {
                if (marker) {
                    shield.onQuarantinedSp(row.isNullAt(PTS) ? null : row.getLong(PTS));
                } else {
                    shield.onSp(row.getLong(PTS), row.getInt(SN), row.getString(CODE));
                }
            } else {
                Long spTs = row.isNullAt(TTS) ? null : row.getLong(TTS);
                Integer spCsn = row.isNullAt(TCSN) ? null : row.getInt(TCSN);
                SpCode[] governing = shield.onTuple(spTs, spCsn);
                if (marker) {
                    continue;  // a broken tuple: its effect on the state only, never delivered
                }
                // governing: the policy the tuple names (its sp_ts) is the provider's current one
                Row decision = governing == null ? null : decide(governing, row.isNullAt(KTEXT) ? null
                    : row.getString(KTEXT), row.isNullAt(KNUM) ? null : row.getDouble(KNUM), spTs);
                out.add(RowFactory.create(row.get(PAYLOAD), decision));
            }
        }
        state.update(shield.snapshot());
        return out.iterator();
    }

    /** The decision of the governing SPs on a key (see the class comment). */
    static Row decide(SpCode[] governing, String key, Double number, long policyTs) {
        long granted = 0, grantable = 0, denied = 0;
        boolean immutable = false;
        for (SpCode sp : governing) {
            immutable |= sp.immutable;
            if (sp.mask == 0 || !sp.matches(key, number)) {
                continue;
            }
            if (!sp.positive) {
                denied |= sp.mask;
            } else {
                granted |= sp.mask;
                if (sp.grant) {
                    grantable |= sp.mask;
                }
            }
        }
        return RowFactory.create(granted & ~denied, grantable & ~denied, immutable, policyTs);
    }

    /** {@code input} (the columns above) through one shield per {@code _g}: {@code _payload}, {@code _gov}. */
    public static Dataset<Row> apply(Dataset<Row> input) {
        StructType payload = (StructType) input.schema().fields()[PAYLOAD].dataType();
        StructType out = new StructType()
            .add("_payload", payload, true)
            .add("_gov", DECISION, true);
        // Grouped by the column itself, not a key function: no per-row call to find the key.
        return input.groupBy(input.col("_g"))
            .as(Encoders.STRING(), Encoders.row(input.schema()))
            .flatMapGroupsWithState(new SecurityShield(), OutputMode.Append(), Encoders.STRING(), Encoders.row(out),
                GroupStateTimeout.NoTimeout());
    }
}
