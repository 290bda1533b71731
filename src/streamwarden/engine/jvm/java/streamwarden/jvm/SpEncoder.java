package streamwarden.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF7;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * SP records encoded for one user in the JVM: the twin of the Python encoder
 * (streamwarden.security.punctuation.encode.SpEncoder), for the records it can read with certainty.
 *
 * <p>It reads a strict subset of the pattern language: ASCII spaces, identifiers, integers
 * of at most 18 digits (a leading {@code -} glued to them), {@code * {} [ ] ( ) ,} and
 * {@code ALL}. That is what providers write (role lists of names, key ranges of numbers);
 * for anything else (quotes, decimals, other whitespace, comments, a syntax error) it
 * answers {@code null} and the record goes to the Python encoder, which stays the
 * reference and reports malformed records. Where it answers, it answers as Python does
 * (tests compare them over generated records): names compare as Python compares an
 * identifier with a value ({@code inf}, {@code Infinity} and {@code nan} read as numbers).
 *
 * <p>Codes are memoized per configuration by the record's fields: a provider repeats a
 * few templates, so a 500-role list is decided once, then costs a hash lookup.
 */
public final class SpEncoder {
    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    private static final int MEMO_LIMIT = 65_536;
    private static final Map<List<Object>, SpEncoder> ENCODERS = new ConcurrentHashMap<>();

    private final String stream;
    private final String[] attributes;
    private final Set<String> roles;
    private final boolean usable;  // every name is an identifier (else every record goes to Python)
    private final Map<List<Object>, String> memo = new ConcurrentHashMap<>();
    private final Map<String, Boolean> roleLists = new ConcurrentHashMap<>();

    private SpEncoder(String stream, String[] attributes, String[] roles) {
        this.stream = stream;
        this.attributes = attributes.clone();
        this.roles = new HashSet<>(Arrays.asList(roles));
        boolean names = NAME.matcher(stream).matches();
        for (String name : attributes) {
            names &= NAME.matcher(name).matches();
        }
        for (String name : roles) {
            names &= NAME.matcher(name).matches();  // so no role reads as a finite number
        }
        usable = names && attributes.length <= 62;
    }

    static SpEncoder of(String stream, String[] attributes, String[] roles) {
        List<Object> key = List.of(stream, List.of(attributes), Set.copyOf(Arrays.asList(roles)));
        return ENCODERS.computeIfAbsent(key, k -> new SpEncoder(stream, attributes, roles));
    }

    /** The record's code, or null when the Python encoder must read it. */
    public static String code(String stream, String[] attributes, String[] roles, String streams, String tuples,
                              String attributePattern, String rolePattern, String sign, Boolean immutable,
                              Boolean grant) {
        return of(stream, attributes, roles).encode(streams, tuples, attributePattern, rolePattern, sign, immutable,
            grant);
    }

    /** A Spark column of the codes of (streams, tuples, attributes, roles, sign, immutable, grant). */
    public static Column column(String stream, String[] attributes, String[] roles, Column[] fields) {
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

    String encode(String streams, String tuples, String attributePattern, String rolePattern, String sign,
                  Boolean immutable, Boolean grant) {
        if (!usable || rolePattern == null) {
            return null;
        }
        List<Object> record = Arrays.asList(streams, tuples, attributePattern, rolePattern, sign, immutable, grant);
        String code = memo.get(record);
        if (code == null) {
            code = fresh(streams, tuples, attributePattern, rolePattern, sign, immutable, grant);
            if (code == null) {
                return null;
            }
            if (memo.size() >= MEMO_LIMIT) {
                memo.clear();
                roleLists.clear();
            }
            memo.put(record, code);
        }
        return code;
    }

    private String fresh(String streams, String tuples, String attributePattern, String rolePattern, String sign,
                         Boolean immutable, Boolean grant) {
        Pat tuplePattern = Pat.parse(tuples == null ? "*" : tuples);
        Pat streamPattern = Pat.parse(streams == null ? "*" : streams);
        Pat attributeNames = Pat.parse(attributePattern == null ? "*" : attributePattern);
        Boolean namesARole = roleLists.get(rolePattern);
        if (namesARole == null) {
            Pat rolePat = Pat.parse(rolePattern);
            if (rolePat == null) {
                return null;
            }
            namesARole = namesARole(rolePat);
            roleLists.put(rolePattern, namesARole);
        }
        String signText = sign == null || sign.isEmpty() ? "+" : sign;
        if (tuplePattern == null || streamPattern == null || attributeNames == null || !ascii(signText)) {
            return null;
        }
        long mask = 0;
        if (streamPattern.matches(stream) && namesARole) {
            for (int j = 0; j < attributes.length; j++) {
                if (attributeNames.matches(attributes[j])) {
                    mask |= 1L << j;
                }
            }
        }
        String lower = signText.toLowerCase(Locale.ROOT);
        boolean positive = lower.equals("+") || lower.equals("positive");
        return "{\"p\":" + positive + ",\"i\":" + Boolean.TRUE.equals(immutable) + ",\"g\":" + Boolean.TRUE.equals(grant)
            + ",\"m\":" + mask + "," + tuplePattern.codePart() + "}";
    }

    /** Does the role pattern name one of the user's roles? (Python's SpEncoder._names_a_role.) */
    private boolean namesARole(Pat pattern) {
        if (pattern.kind == Pat.Kind.CONST || pattern.kind == Pat.Kind.SET) {
            // Every role is an identifier, so none reads as a finite number: membership by text.
            for (Value value : pattern.values) {
                if (roles.contains(value.text)) {
                    return true;
                }
            }
            return false;
        }
        for (String role : roles) {
            if (pattern.matches(role)) {
                return true;
            }
        }
        return false;
    }

    private static boolean ascii(String text) {
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) > 0x7f) {
                return false;
            }
        }
        return true;
    }

    /** A value of a pattern: an identifier or an integer, with what Python's float() makes of it. */
    static final class Value {
        final String text;
        final boolean integer;
        final long number;  // when integer

        Value(String text, boolean integer, long number) {
            this.text = text;
            this.integer = integer;
            this.number = number;
        }

        /** streamwarden.language.patterns._number: an integer, or inf / infinity / nan (any case) for a name. */
        Double pythonNumber() {
            return integer ? Double.valueOf((double) number) : nameNumber(text);
        }

        static Double nameNumber(String name) {
            String lower = name.toLowerCase(Locale.ROOT);
            if (lower.equals("inf") || lower.equals("infinity")) {
                return Double.POSITIVE_INFINITY;
            }
            return lower.equals("nan") ? Double.NaN : null;
        }
    }

    /** A pattern of the strict subset, parsed as streamwarden.language.patterns parses it. */
    static final class Pat {
        enum Kind { ANY, NONE, CONST, SET, CLOSED, OPEN }

        final Kind kind;
        final List<Value> values;

        private Pat(Kind kind, List<Value> values) {
            this.kind = kind;
            this.values = values;
        }

        /** The pattern, or null when the text is outside the subset (or not a pattern at all). */
        static Pat parse(String text) {
            List<Object> tokens = tokens(text);  // Character punctuation, or Value
            if (tokens == null || tokens.isEmpty()) {
                return null;
            }
            Object first = tokens.get(0);
            Pat pattern;
            int next;
            if (first.equals('*') || (first instanceof Value && !((Value) first).integer
                    && ((Value) first).text.equalsIgnoreCase("ALL"))) {
                pattern = new Pat(Kind.ANY, List.of());
                next = 1;
            } else if (first.equals('{')) {
                List<Value> values = new ArrayList<>();
                int i = 1;
                while (i < tokens.size() && !tokens.get(i).equals('}')) {
                    if (!(tokens.get(i) instanceof Value)) {
                        return null;
                    }
                    values.add((Value) tokens.get(i++));
                    if (i < tokens.size() && tokens.get(i).equals(',')) {
                        i++;
                    } else if (i >= tokens.size() || !tokens.get(i).equals('}')) {
                        return null;
                    }
                }
                if (i >= tokens.size()) {
                    return null;
                }
                pattern = values.isEmpty() ? new Pat(Kind.NONE, List.of()) : new Pat(Kind.SET, values);
                next = i + 1;
            } else if (first.equals('[') || first.equals('(')) {
                boolean inclusive = first.equals('[');
                if (tokens.size() < 5 || !(tokens.get(1) instanceof Value) || !tokens.get(2).equals(',')
                        || !(tokens.get(3) instanceof Value) || !tokens.get(4).equals(inclusive ? ']' : ')')) {
                    return null;
                }
                pattern = new Pat(inclusive ? Kind.CLOSED : Kind.OPEN, List.of((Value) tokens.get(1),
                    (Value) tokens.get(3)));
                next = 5;
            } else if (first instanceof Value) {
                pattern = new Pat(Kind.CONST, List.of((Value) first));
                next = 1;
            } else {
                return null;
            }
            return next == tokens.size() ? pattern : null;
        }

        private static List<Object> tokens(String text) {
            List<Object> tokens = new ArrayList<>();
            int i = 0, n = text.length();
            while (i < n) {
                char c = text.charAt(i);
                if (c == ' ') {
                    i++;
                } else if ("*{}[](),".indexOf(c) >= 0) {
                    tokens.add(c);
                    i++;
                } else if (isLetter(c)) {
                    int start = i;
                    while (i < n && (isLetter(text.charAt(i)) || isDigit(text.charAt(i)))) {
                        i++;
                    }
                    tokens.add(new Value(text.substring(start, i), false, 0));
                } else if (isDigit(c) || (c == '-' && i + 1 < n && isDigit(text.charAt(i + 1)))) {
                    boolean negative = c == '-';
                    int start = negative ? i + 1 : i;
                    i = start;
                    while (i < n && isDigit(text.charAt(i))) {
                        i++;
                    }
                    if (i < n && (isLetter(text.charAt(i)) || text.charAt(i) == '.')) {
                        return null;  // 1e5, 1.5, 12abc: the Python tokenizer's business
                    }
                    String digits = text.substring(start, i).replaceFirst("^0+(?=.)", "");
                    if (digits.length() > 18) {
                        return null;
                    }
                    long value = Long.parseLong(digits);
                    value = negative ? -value : value;
                    tokens.add(new Value(Long.toString(value), true, value));
                } else {
                    return null;
                }
            }
            return tokens;
        }

        private static boolean isLetter(char c) {
            return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        }

        private static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        /** Pattern.matches(name) in Python, for a name (stream, attribute or role: an identifier). */
        boolean matches(String name) {
            switch (kind) {
                case ANY:
                    return true;
                case NONE:
                    return false;
                case CONST:
                case SET:
                    for (Value value : values) {
                        if (same(name, value)) {
                            return true;
                        }
                    }
                    return false;
                default:
                    boolean inclusive = kind == Kind.CLOSED;
                    return below(values.get(0), name, inclusive) && above(values.get(1), name, inclusive);
            }
        }

        private static boolean same(String name, Value value) {
            Double a = Value.nameNumber(name), b = value.pythonNumber();
            if (a != null && b != null) {
                return a.doubleValue() == b.doubleValue();  // Python's float ==: NaN equals nothing
            }
            return name.equals(value.text);
        }

        /** low <= name (or <): as numbers when both read as numbers, else as text. */
        private static boolean below(Value low, String name, boolean inclusive) {
            Double a = low.pythonNumber(), b = Value.nameNumber(name);
            if (a != null && b != null) {
                return inclusive ? a <= b : a < b;  // primitive comparisons: false with NaN, as in Python
            }
            int order = low.text.compareTo(name);  // ASCII: UTF-16 order is code point order
            return inclusive ? order <= 0 : order < 0;
        }

        /** name <= high (or <). */
        private static boolean above(Value high, String name, boolean inclusive) {
            Double a = Value.nameNumber(name), b = high.pythonNumber();
            if (a != null && b != null) {
                return inclusive ? a <= b : a < b;
            }
            int order = name.compareTo(high.text);
            return inclusive ? order <= 0 : order < 0;
        }

        /** The tuple pattern's members of the code (encode._tuple_part): texts, and finite numbers. */
        String codePart() {
            String kindName = kind.name().toLowerCase(Locale.ROOT);
            if (kind == Kind.ANY || kind == Kind.NONE) {
                return "\"k\":\"" + kindName + "\",\"ls\":null,\"hs\":null,\"ld\":null,\"hd\":null,\"vs\":[],\"vd\":[]";
            }
            StringBuilder texts = new StringBuilder(), numbers = new StringBuilder();
            for (Value value : values) {
                texts.append(texts.length() > 0 ? "," : "").append('"').append(value.text).append('"');
                numbers.append(numbers.length() > 0 ? "," : "").append(finite(value));
            }
            Value low = values.get(0), high = values.size() > 1 ? values.get(1) : null;
            return "\"k\":\"" + kindName + "\",\"ls\":\"" + low.text + "\",\"hs\":"
                + (high == null ? "null" : "\"" + high.text + "\"") + ",\"ld\":" + finite(low) + ",\"hd\":"
                + (high == null ? "null" : finite(high)) + ",\"vs\":[" + texts + "],\"vd\":[" + numbers + "]";
        }

        /** encode._number: the value as a finite number, or null (a name never is one). */
        private static String finite(Value value) {
            return value.integer ? Double.toString((double) value.number) : "null";
        }
    }
}
