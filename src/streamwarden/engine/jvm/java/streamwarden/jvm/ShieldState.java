package streamwarden.jvm;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Security Shield's state machine for one punctuated (sub-)stream (Nehme et al., Fig. 10,
 * with issue 3's precisions): the JVM twin of the Python model in tests/oracles/shield.py,
 * which stays the reference (the tests run both over the same records).
 *
 * <ul>
 *   <li>an SP older than the newest policy timestamp ever seen is discarded;</li>
 *   <li>an SP with the current policy's timestamp joins it (a duplicate sequence number
 *       replaces the old SP); a newer one, or any with no current policy, starts a new policy;</li>
 *   <li>at the first tuple after an sp-batch the policy's csn is fixed: the largest k such
 *       that SPs 1..k are all present;</li>
 *   <li>a tuple whose (sp_ts, sp_csn) differs from (policy ts, csn) is denied and the policy
 *       dropped; a tuple without them, or with no policy, or under csn 0, is denied;</li>
 *   <li>a quarantined SP (a broken record the engine dropped, see {@link #onQuarantinedSp})
 *       taints its policy: the policy governs no tuple, until a newer policy replaces it.</li>
 * </ul>
 *
 * Timestamps are microseconds since the epoch. SP codes are the JSON objects the Python
 * encoder made of each SP record (kept as text for the snapshot, parsed once into
 * {@link SpCode}); a governed tuple gets its policy's codes, in arrival order.
 */
final class ShieldState {
    private boolean hasPolicy;
    private long currentTs;
    private final LinkedHashMap<Integer, String> sps = new LinkedHashMap<>();  // sn -> code, in arrival order
    private boolean csnFixed;
    private int csn;
    private boolean hasNewest;
    private long newest;
    private boolean pending;
    private SpCode[] governing;  // the governing policy's SPs 1..csn, gathered once per csn
    private boolean tainted;  // the current policy lost an SP to quarantine: it grants nothing

    void onSp(long ts, int sn, String code) {
        if (hasNewest && ts < newest) {
            return;  // discarded
        }
        if (hasPolicy && ts == currentTs) {
            sps.remove(sn);  // a duplicate sequence number replaces the old SP
            sps.put(sn, code);
        } else {
            hasPolicy = true;
            currentTs = ts;
            sps.clear();
            sps.put(sn, code);
            csnFixed = false;
            tainted = false;
        }
        newest = hasNewest ? Math.max(newest, ts) : ts;
        hasNewest = true;
        pending = true;
        governing = null;
    }

    /**
     * An SP of this sub-stream that the engine quarantined (a broken record, dropped unread):
     * the policy it belongs to is incomplete, so it grants no tuple, whatever its other SPs
     * say (a lost negative SP never becomes access). {@code ts} is the broken SP's policy
     * timestamp, or null when it cannot be read: then it taints the policy in force. With a
     * timestamp it acts on the state as the SP would have: discarded when older than the
     * newest policy, joining the current policy, or starting a new (tainted) one.
     */
    void onQuarantinedSp(Long ts) {
        if (ts == null) {
            tainted = hasPolicy;
            return;
        }
        if (hasNewest && ts < newest) {
            return;  // the SP would have been discarded: it governed nothing
        }
        if (!hasPolicy || ts != currentTs) {
            hasPolicy = true;
            currentTs = ts;
            sps.clear();
            csnFixed = false;
        }
        tainted = true;
        newest = hasNewest ? Math.max(newest, ts) : ts;
        hasNewest = true;
        pending = true;
        governing = null;
    }

    private int fixCsn() {
        if (pending || !csnFixed) {
            int k = 0;
            while (sps.containsKey(k + 1)) {
                k++;
            }
            csn = k;
            csnFixed = true;
            pending = false;
            governing = null;
        }
        return csn;
    }

    /** The codes of the SPs governing this tuple, or null when it is denied. */
    SpCode[] onTuple(Long spTs, Integer spCsn) {
        if (!hasPolicy) {
            return null;
        }
        int fixed = fixCsn();
        if (spTs == null || spCsn == null) {
            return null;
        }
        if (spTs != currentTs || spCsn != fixed) {
            drop();
            return null;
        }
        if (fixed == 0 || tainted) {
            return null;  // SP 1 never arrived, or an SP was quarantined: the policy is incomplete, deny
        }
        if (governing == null) {
            List<SpCode> codes = new ArrayList<>(fixed);
            for (Map.Entry<Integer, String> sp : sps.entrySet()) {
                if (sp.getKey() <= fixed) {
                    codes.add(SpCode.parse(sp.getValue()));
                }
            }
            governing = codes.toArray(new SpCode[0]);
        }
        return governing;
    }

    private void drop() {
        hasPolicy = false;
        sps.clear();
        csnFixed = false;
        governing = null;
        tainted = false;
    }

    // -- snapshots: one line of header, then one line per SP ("sn<TAB>code"; codes are JSON, no raw tab or LF) --
    String snapshot() {
        StringBuilder text = new StringBuilder();
        text.append(hasPolicy ? Long.toString(currentTs) : "-").append(' ')
            .append(csnFixed ? Integer.toString(csn) : "-").append(' ')
            .append(hasNewest ? Long.toString(newest) : "-").append(' ')
            .append(pending ? 1 : 0).append(' ')
            .append(tainted ? 1 : 0);
        for (Map.Entry<Integer, String> sp : sps.entrySet()) {
            text.append('\n').append(sp.getKey()).append('\t').append(sp.getValue());
        }
        return text.toString();
    }

    static ShieldState restore(String text) {
        ShieldState state = new ShieldState();
        String[] lines = text.split("\n", -1);
        String[] head = lines[0].split(" ");
        state.hasPolicy = !head[0].equals("-");
        if (state.hasPolicy) {
            state.currentTs = Long.parseLong(head[0]);
        }
        state.csnFixed = !head[1].equals("-");
        if (state.csnFixed) {
            state.csn = Integer.parseInt(head[1]);
        }
        state.hasNewest = !head[2].equals("-");
        if (state.hasNewest) {
            state.newest = Long.parseLong(head[2]);
        }
        state.pending = head[3].equals("1");
        state.tainted = head.length > 4 && head[4].equals("1");  // absent in snapshots written before quarantine
        for (int i = 1; i < lines.length; i++) {
            int tab = lines[i].indexOf('\t');
            state.sps.put(Integer.parseInt(lines[i].substring(0, tab)), lines[i].substring(tab + 1));
        }
        return state;
    }
}
