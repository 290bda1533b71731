package streamwarden.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * One SP as the Python encoder settled it for one user (streamwarden.security.punctuation.encode):
 * its sign, immutable and grant flags, the attribute mask it speaks for ({@code m}: 0 when its
 * stream or role pattern does not name this stream or one of the user's roles), and its tuple
 * pattern, parsed once here when the shield meets the SP.
 *
 * <p>{@link #matches} is the per-tuple test, with Spark SQL's semantics, because it replaces
 * a Spark SQL expression and is tested against it: a bound or a listed value compares as a
 * number when it and the key both read as numbers, else as text; doubles compare as Spark
 * orders them (NaN above every number and equal to itself, -0.0 equal to 0.0); text compares
 * in code point order (Spark compares UTF-8 bytes); a NULL key matches only {@code *}.
 */
final class SpCode {
    private static final ObjectMapper JSON = new ObjectMapper();

    enum Kind { ANY, NONE, CONST, SET, CLOSED, OPEN }

    final boolean positive;
    final boolean immutable;
    final boolean grant;
    final long mask;
    private final Kind kind;
    private final String lowText, highText;
    private final Double lowNumber, highNumber;
    private final String[] texts;
    private final double[] numbers;  // the listed values that read as numbers

    private SpCode(JsonNode code) {
        positive = code.path("p").asBoolean();
        immutable = code.path("i").asBoolean();
        grant = code.path("g").asBoolean();
        mask = code.path("m").asLong();
        kind = Kind.valueOf(code.path("k").asText().toUpperCase(java.util.Locale.ROOT));
        lowText = text(code.get("ls"));
        highText = text(code.get("hs"));
        lowNumber = number(code.get("ld"));
        highNumber = number(code.get("hd"));
        List<String> listed = new ArrayList<>();
        code.path("vs").forEach(v -> listed.add(v.asText()));
        texts = listed.toArray(new String[0]);
        List<Double> numeric = new ArrayList<>();
        code.path("vd").forEach(v -> {
            if (v.isNumber()) {
                numeric.add(v.asDouble());
            }
        });
        numbers = numeric.stream().mapToDouble(Double::doubleValue).toArray();
    }

    // Providers repeat a few policy templates: a code met before is not parsed again.
    private static final Map<String, SpCode> PARSED = new ConcurrentHashMap<>();
    private static final int PARSED_LIMIT = 16_384;
    private static final int PARSED_CODE_CHARS = 4_096;

    /** The code's JSON object, as the encoder wrote it. */
    static SpCode parse(String json) {
        SpCode code = PARSED.get(json);
        if (code == null) {
            if (PARSED.size() >= PARSED_LIMIT) {
                PARSED.clear();
            }
            code = read(json);
            if (json.length() <= PARSED_CODE_CHARS) {  // a provider's huge pattern is not kept
                PARSED.put(json, code);
            }
        }
        return code;
    }

    private static SpCode read(String json) {
        try {
            return new SpCode(JSON.readTree(json));
        } catch (java.io.IOException | RuntimeException e) {
            // Codes come from streamwarden's own encoder: a code it did not write is a bug, never data.
            throw new IllegalStateException("not an SP code: " + e.getMessage(), e);
        }
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    private static Double number(JsonNode node) {
        return node == null || !node.isNumber() ? null : node.asDouble();
    }

    /** Does the tuple pattern match a key (its text, and its number when it reads as one; either may be null)? */
    boolean matches(String text, Double number) {
        switch (kind) {
            case ANY:
                return true;
            case CONST:
            case SET:
                return listed(text, number);
            case CLOSED:
            case OPEN:
                return inRange(text, number, kind == Kind.CLOSED);
            default:
                return false;
        }
    }

    private boolean listed(String text, Double number) {
        if (text != null) {
            for (String value : texts) {
                if (value.equals(text)) {
                    return true;
                }
            }
        }
        if (number != null) {
            for (double value : numbers) {
                if (Spark.compareDoubles(value, number) == 0) {
                    return true;
                }
            }
        }
        return false;
    }

    private boolean inRange(String text, Double number, boolean inclusive) {
        // Each bound on its own: as numbers when the bound and the key both are, else as text.
        Integer above = lowNumber != null && number != null ? Integer.valueOf(Spark.compareDoubles(lowNumber, number))
            : lowText != null && text != null ? Integer.valueOf(Spark.compareText(lowText, text)) : null;
        Integer below = highNumber != null && number != null ? Integer.valueOf(Spark.compareDoubles(number, highNumber))
            : highText != null && text != null ? Integer.valueOf(Spark.compareText(text, highText)) : null;
        if (above == null || below == null) {
            return false;  // NULL in SQL, and a NULL match is no match
        }
        return inclusive ? above <= 0 && below <= 0 : above < 0 && below < 0;
    }

    /** Spark SQL's orderings, which the matcher must reproduce. */
    static final class Spark {
        private Spark() {
        }

        /** SQLOrderingUtil.compareDoubles: NaN equals NaN and is above everything; -0.0 equals 0.0. */
        static int compareDoubles(double x, double y) {
            return x == y ? 0 : Double.compare(x, y);
        }

        /** UTF8String order (unsigned UTF-8 bytes), i.e. code points: a supplementary character
         *  (a surrogate pair in Java) is above every BMP character, U+E000..U+FFFF included. */
        static int compareText(String a, String b) {
            int n = Math.min(a.length(), b.length());
            for (int i = 0; i < n; i++) {
                char x = a.charAt(i), y = b.charAt(i);
                if (x != y) {
                    boolean sx = Character.isSurrogate(x), sy = Character.isSurrogate(y);
                    if (sx != sy) {
                        return sx ? 1 : -1;
                    }
                    return x - y;
                }
            }
            return a.length() - b.length();
        }
    }
}
