package streamwarden.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF7;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * SP records encoded for one user in the JVM: the twin of the Python encoder
 * (streamwarden.security.punctuation.encode.SpEncoder), which stays the reference; tests
 * compare the two over generated records, malformed ones included.
 *
 * <p>A record's code settles everything about it that does not depend on the tuple: the
 * stream pattern against the stream, the role pattern against the user's roles and the
 * attribute pattern against each attribute become one mask, and the tuple pattern is kept
 * for {@link SpCode}. A record whose pattern does not parse gets {@code !} and the reason,
 * which the reader reports as a broken record naming its file and line.
 *
 * <p>Codes are memoized per configuration by the record's fields: a provider repeats a
 * few templates, so a 500-role list is decided once, then costs a hash lookup.
 */
public final class SpEncoder {
    private static final java.util.regex.Pattern NAME = java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    private static final int MEMO_LIMIT = 65_536;
    // Memory a provider's records can pin in the memo: a record longer than this is encoded
    // each time it comes, and the memo starts over past the total (a task's heap is shared).
    private static final int MEMO_RECORD_CHARS = 16_384;
    private static final long MEMO_TOTAL_CHARS = 32L << 20;  // records and codes (a role list is counted once)
    private static final int MAX_ATTRIBUTES = 62;
    private static final Map<List<Object>, SpEncoder> ENCODERS = new ConcurrentHashMap<>();

    private final String stream;
    private final String[] attributes;
    private final Set<String> roles;
    private final Map<List<Object>, String> memo = new ConcurrentHashMap<>();
    private final Map<String, RoleList> roleLists = new ConcurrentHashMap<>();
    // The last role lists met, compared by equals before any hashing: providers repeat a few
    // long lists, and hashing a 3 KB text for every record cost more than comparing it.
    private final RoleList[] recent = new RoleList[4];
    private int nextRecent;
    private final java.util.concurrent.atomic.AtomicLong memoChars = new java.util.concurrent.atomic.AtomicLong();

    private SpEncoder(String stream, String[] attributes, String[] roles) {
        // Catalog names are identifiers, which never read as numbers: names match patterns by text.
        List<String> names = new ArrayList<>(Arrays.asList(attributes));
        names.add(stream);
        names.addAll(Arrays.asList(roles));
        for (String name : names) {
            if (!NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("not a catalog name: " + name);
            }
        }
        if (attributes.length > MAX_ATTRIBUTES) {
            throw new IllegalArgumentException("SP masks hold at most " + MAX_ATTRIBUTES + " attributes");
        }
        this.stream = stream;
        this.attributes = attributes.clone();
        this.roles = new HashSet<>(Arrays.asList(roles));
    }

    static SpEncoder of(String stream, String[] attributes, String[] roles) {
        List<Object> key = List.of(stream, List.of(attributes), Set.copyOf(Arrays.asList(roles)));
        return ENCODERS.computeIfAbsent(key, k -> new SpEncoder(stream, attributes, roles));
    }

    /** The record's code (or {@code !} and why it is malformed), for tests. */
    public static String code(String stream, String[] attributes, String[] roles, String streams, String tuples,
                              String attributePattern, String rolePattern, String sign, Boolean immutable,
                              Boolean grant) {
        return of(stream, attributes, roles).encode(streams, tuples, attributePattern, rolePattern, sign, immutable,
            grant);
    }

    /** A Spark column of the codes of (streams, tuples, attributes, roles, sign, immutable, grant). */
    public static Column column(String stream, String[] attributes, String[] roles, Column[] fields) {
        of(stream, attributes, roles);  // refuse a configuration here, on the driver, not in a task
        // Nondeterministic only so that the optimizer never copies the call into each use of the code.
        UserDefinedFunction udf = functions.udf(new Udf(stream, attributes, roles), DataTypes.StringType)
            .asNondeterministic();
        return udf.apply(fields);
    }

    /** The encoder as a Spark UDF: it finds its (shared, memoizing) encoder once per task. */
    private static final class Udf implements UDF7<String, String, String, String, String, Boolean, Boolean, String> {
        private static final long serialVersionUID = 1L;
        private final String stream;
        private final String[] attributes;
        private final String[] roles;
        private transient SpEncoder encoder;

        Udf(String stream, String[] attributes, String[] roles) {
            this.stream = stream;
            this.attributes = attributes;
            this.roles = roles;
        }

        @Override
        public String call(String streams, String tuples, String attributePattern, String rolePattern, String sign,
                           Boolean immutable, Boolean grant) {
            if (encoder == null) {
                encoder = of(stream, attributes, roles);
            }
            return encoder.encode(streams, tuples, attributePattern, rolePattern, sign, immutable, grant);
        }
    }

    /** A role pattern's text and what it decides: Boolean (names a role of the user) or a malformed reason. */
    private record RoleList(String text, Object decision) {
    }

    private RoleList roleList(String text, boolean remember) {
        if (!remember) {
            return new RoleList(text, decide(text));
        }
        for (RoleList seen : recent) {
            if (seen != null && java.util.Objects.equals(seen.text(), text)) {
                return seen;
            }
        }
        RoleList found = text == null ? null : roleLists.get(text);
        if (found == null) {
            found = new RoleList(text, decide(text));
            if (text != null) {
                roleLists.put(text, found);
                memoChars.addAndGet(text.length());
            }
        }
        synchronized (recent) {
            recent[nextRecent] = found;
            nextRecent = (nextRecent + 1) % recent.length;
        }
        return found;
    }

    private Object decide(String rolePattern) {
        if (rolePattern == null) {
            return malformed("roles", null);
        }
        PatternReader.Pattern pattern = PatternReader.parse(rolePattern);
        return pattern == null ? malformed("roles", rolePattern) : (Object) namesARole(pattern);
    }

    String encode(String streams, String tuples, String attributePattern, String rolePattern, String sign,
                  Boolean immutable, Boolean grant) {
        long size = length(streams) + length(tuples) + length(attributePattern) + length(rolePattern) + length(sign);
        if (size > MEMO_RECORD_CHARS) {
            return fresh(streams, tuples, attributePattern, roleList(rolePattern, false), sign, immutable, grant);
        }
        RoleList roles = roleList(rolePattern, true);
        // Keyed by the role list (its text's hash is computed once and kept by the String): no text hashed again.
        List<Object> record = Arrays.asList(streams, tuples, attributePattern, roles, sign, immutable, grant);
        String code = memo.get(record);
        if (code == null) {
            if (memo.size() >= MEMO_LIMIT || memoChars.get() > MEMO_TOTAL_CHARS) {
                synchronized (recent) {
                    Arrays.fill(recent, null);
                }
                memo.clear();
                roleLists.clear();
                memoChars.set(0);
                roles = roleList(rolePattern, true);
                record = Arrays.asList(streams, tuples, attributePattern, roles, sign, immutable, grant);
            }
            code = fresh(streams, tuples, attributePattern, roles, sign, immutable, grant);
            memo.put(record, code);
            memoChars.addAndGet(size - length(rolePattern) + code.length());  // the role list is the RoleList's
        }
        return code;
    }

    private static String malformed(String name, String text) {
        return "!malformed " + name + " pattern " + (text == null ? "(missing)" : text);
    }

    private static long length(String text) {
        return text == null ? 0 : text.length();
    }

    private String fresh(String streams, String tuples, String attributePattern, RoleList roles, String sign,
                         Boolean immutable, Boolean grant) {
        // Every pattern is read before anything is decided, in Python's order, so a malformed one is always named.
        PatternReader.Pattern tuplePattern = PatternReader.parse(tuples == null ? "*" : tuples);
        if (tuplePattern == null) {
            return malformed("tuples", tuples);
        }
        PatternReader.Pattern streamPattern = PatternReader.parse(streams == null ? "*" : streams);
        if (streamPattern == null) {
            return malformed("streams", streams);
        }
        PatternReader.Pattern attributeNames = PatternReader.parse(attributePattern == null ? "*" : attributePattern);
        if (attributeNames == null) {
            return malformed("attributes", attributePattern);
        }
        Object namesARole = roles.decision();
        if (namesARole instanceof String) {
            return (String) namesARole;
        }
        long mask = 0;
        if (streamPattern.matchesName(stream) && (Boolean) namesARole) {
            for (int j = 0; j < attributes.length; j++) {
                if (attributeNames.matchesName(attributes[j])) {
                    mask |= 1L << j;
                }
            }
        }
        String signText = sign == null || sign.isEmpty() ? "+" : sign;
        // Python's str.lower(): no character outside ASCII lowers to one of "+positive".
        String lower = signText.toLowerCase(Locale.ROOT);
        boolean positive = lower.equals("+") || lower.equals("positive");
        return "{\"p\":" + positive + ",\"i\":" + Boolean.TRUE.equals(immutable) + ",\"g\":" + Boolean.TRUE.equals(grant)
            + ",\"m\":" + mask + "," + tuplePart(tuplePattern) + "}";
    }

    /** Does the role pattern name one of the user's roles? (Python's SpEncoder._names_a_role.) */
    private boolean namesARole(PatternReader.Pattern pattern) {
        if (pattern.kind == PatternReader.Kind.CONST || pattern.kind == PatternReader.Kind.SET) {
            for (PatternReader.Value value : pattern.values) {
                if (roles.contains(value.text)) {
                    return true;  // roles are identifiers: none reads as a number, so text decides
                }
            }
            return false;
        }
        for (String role : roles) {
            if (pattern.matchesName(role)) {
                return true;
            }
        }
        return false;
    }

    /** The tuple pattern's members of the code (encode._tuple_part). */
    private static String tuplePart(PatternReader.Pattern pattern) {
        String kind = pattern.kind == PatternReader.Kind.NONE ? "none" : pattern.kind.name().toLowerCase(Locale.ROOT);
        List<PatternReader.Value> values = pattern.values;
        StringBuilder out = new StringBuilder("\"k\":\"").append(kind).append('"');
        out.append(",\"ls\":").append(values.isEmpty() ? "null" : json(values.get(0).text));
        out.append(",\"hs\":").append(values.size() > 1 ? json(values.get(1).text) : "null");
        out.append(",\"ld\":").append(values.isEmpty() ? "null" : json(values.get(0).number));
        out.append(",\"hd\":").append(values.size() > 1 ? json(values.get(1).number) : "null");
        out.append(",\"vs\":[");
        for (int i = 0; i < values.size(); i++) {
            out.append(i > 0 ? "," : "").append(json(values.get(i).text));
        }
        out.append("],\"vd\":[");
        for (int i = 0; i < values.size(); i++) {
            out.append(i > 0 ? "," : "").append(json(values.get(i).number));
        }
        return out.append(']').toString();
    }

    private static String json(Double number) {
        return number == null ? "null" : Double.toString(number);  // any JSON number that reads back as it
    }

    private static String json(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
