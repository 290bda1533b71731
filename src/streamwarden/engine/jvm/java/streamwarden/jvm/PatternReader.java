package streamwarden.jvm;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * SP pattern texts read as streamwarden.language.patterns reads them (its tokenizer is
 * streamwarden.language.lexer, ASCII): the JVM twin the SP encoder uses, tested against
 * Python over generated texts.
 *
 * <p>{@code {}} nothing, {@code *} or {@code ALL} everything, a value, {@code {v, ...}},
 * {@code [lo, hi]} and {@code (lo, hi)}. A value is an integer (a long), a decimal (a finite
 * double), a quoted string (its text between the quotes, as written) or a name. A text that
 * is not a pattern gives {@code null}. The scanner is written out, not a regular
 * expression: Java's regex engine recurses per repetition of a group, and a provider's
 * long quoted string must not overflow a task's stack.
 */
public final class PatternReader {
    private static final BigInteger LONG_LIMIT = BigInteger.ONE.shiftLeft(63);  // 2**63, only as -2**63
    private static final double TWO_TO_63 = 9.223372036854775808E18;

    private PatternReader() {
    }

    /** A pattern value as Python holds it: an int, a float or a str. */
    static final class Value {
        final String text;     // str(value): Python's text of it (repr for a float)
        final Double number;   // encode._number(value): a finite double, or null

        Value(String text, Double number) {
            this.text = text;
            this.number = number;
        }
    }

    enum Kind { ANY, NONE, CONST, SET, CLOSED, OPEN }

    /** A parsed pattern. */
    static final class Pattern {
        final Kind kind;
        final List<Value> values;

        Pattern(Kind kind, List<Value> values) {
            this.kind = kind;
            this.values = values;
        }

        /** Pattern.matches(name) for a catalog name (an identifier, so never a number): by text. */
        boolean matchesName(String name) {
            switch (kind) {
                case ANY:
                    return true;
                case NONE:
                    return false;
                case CONST:
                case SET:
                    for (Value value : values) {
                        if (value.text.equals(name)) {
                            return true;
                        }
                    }
                    return false;
                default:
                    int low = SpCode.Spark.compareText(values.get(0).text, name);
                    int high = SpCode.Spark.compareText(name, values.get(1).text);
                    return kind == Kind.CLOSED ? low <= 0 && high <= 0 : low < 0 && high < 0;
            }
        }
    }

    // -- tokens ----------------------------------------------------------------------------------
    private enum T { STAR, MINUS, LBRACE, RBRACE, LBRACKET, RBRACKET, LPAREN, RPAREN, COMMA, NUMBER, STRING, WORD,
        OTHER, EOF }

    private record Token(T type, String text) {
    }

    private static boolean space(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == 0x0b;
    }

    private static boolean digit(char c) {
        return c >= '0' && c <= '9';
    }

    private static boolean letter(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    }

    /** The tokens, or null where the tokenizer raises (an unexpected character, an unterminated string). */
    private static List<Token> tokens(String text) {
        List<Token> out = new ArrayList<>();
        int i = 0, n = text.length();
        while (i < n) {
            char c = text.charAt(i);
            if (space(c)) {
                i++;
            } else if (c == '-' && i + 1 < n && text.charAt(i + 1) == '-') {
                while (i < n && text.charAt(i) != '\n') {
                    i++;  // a comment, to the end of the line
                }
            } else if (digit(c) || (c == '.' && i + 1 < n && digit(text.charAt(i + 1)))) {
                int start = i;
                while (i < n && digit(text.charAt(i))) {
                    i++;
                }
                if (i < n && text.charAt(i) == '.') {
                    i++;
                    while (i < n && digit(text.charAt(i))) {
                        i++;
                    }
                }
                i = exponent(text, i);
                out.add(new Token(T.NUMBER, text.substring(start, i)));
            } else if (c == '\'' || c == '"') {
                int end = stringEnd(text, i);
                if (end < 0) {
                    return null;
                }
                out.add(new Token(T.STRING, text.substring(i, end)));
                i = end;
            } else if (letter(c)) {
                int start = i;
                while (i < n && (letter(text.charAt(i)) || digit(text.charAt(i)))) {
                    i++;
                }
                out.add(new Token(T.WORD, text.substring(start, i)));
            } else {
                T type = punctuation(c);
                if (type == null) {
                    if (c == '!' && i + 1 < n && text.charAt(i + 1) == '=') {
                        i++;  // "!=" is one operator token; no pattern takes it
                    } else {
                        return null;
                    }
                    type = T.OTHER;
                } else if (type == T.OTHER && (c == '<' || c == '>') && i + 1 < n
                        && (text.charAt(i + 1) == '=' || (c == '<' && text.charAt(i + 1) == '>'))) {
                    i++;
                }
                out.add(new Token(type, String.valueOf(c)));
                i++;
            }
        }
        out.add(new Token(T.EOF, ""));
        return out;
    }

    /** After a number's digits: its exponent, when one follows in full ([eE][-+]?digits). */
    private static int exponent(String text, int i) {
        int n = text.length();
        if (i < n && (text.charAt(i) == 'e' || text.charAt(i) == 'E')) {
            int j = i + 1;
            if (j < n && (text.charAt(j) == '+' || text.charAt(j) == '-')) {
                j++;
            }
            if (j < n && digit(text.charAt(j))) {
                while (j < n && digit(text.charAt(j))) {
                    j++;
                }
                return j;
            }
        }
        return i;
    }

    /** The end (exclusive) of the quoted string starting at {@code start}, or -1 if unterminated. */
    private static int stringEnd(String text, int start) {
        char quote = text.charAt(start);
        int i = start + 1, n = text.length();
        while (i < n) {
            char c = text.charAt(i);
            if (c == '\\') {
                if (i + 1 >= n || text.charAt(i + 1) == '\n') {
                    return -1;  // an escape takes any character but a newline
                }
                i += 2;
            } else if (c == quote) {
                if (i + 1 < n && text.charAt(i + 1) == quote) {
                    i += 2;  // a doubled quote
                } else {
                    return i + 1;
                }
            } else {
                i++;
            }
        }
        return -1;
    }

    private static T punctuation(char c) {
        switch (c) {
            case '*': return T.STAR;
            case '-': return T.MINUS;
            case '{': return T.LBRACE;
            case '}': return T.RBRACE;
            case '[': return T.LBRACKET;
            case ']': return T.RBRACKET;
            case '(': return T.LPAREN;
            case ')': return T.RPAREN;
            case ',': return T.COMMA;
            // operators and punctuation the CQL tokenizer knows, which no pattern takes
            case '<': case '>': case '=': case '+': case '/': case '%': case '.': case ';': case ':': case '\u22a5':
                return T.OTHER;
            default: return null;
        }
    }

    // -- the parser (streamwarden.language.patterns._PatternParser) ---------------------------------
    /** The pattern {@code text} holds, or null when Python's parser would raise. */
    static Pattern parse(String text) {
        List<Token> tokens = tokens(text);
        if (tokens == null) {
            return null;
        }
        int[] at = {0};
        Pattern pattern = pattern(tokens, at);
        return pattern != null && tokens.get(at[0]).type() == T.EOF ? pattern : null;
    }

    private static Pattern pattern(List<Token> tokens, int[] at) {
        Token tok = tokens.get(at[0]);
        if (tok.type() == T.STAR || (tok.type() == T.WORD && tok.text().toUpperCase(Locale.ROOT).equals("ALL"))) {
            at[0]++;
            return new Pattern(Kind.ANY, List.of());
        }
        if (tok.type() == T.LBRACE) {
            at[0]++;
            List<Value> values = new ArrayList<>();
            while (tokens.get(at[0]).type() != T.RBRACE) {
                Value value = value(tokens, at);
                if (value == null) {
                    return null;
                }
                values.add(value);
                if (tokens.get(at[0]).type() == T.COMMA) {
                    at[0]++;
                } else if (tokens.get(at[0]).type() != T.RBRACE) {
                    return null;
                }
            }
            at[0]++;
            return values.isEmpty() ? new Pattern(Kind.NONE, List.of()) : new Pattern(Kind.SET, values);
        }
        if (tok.type() == T.LBRACKET || tok.type() == T.LPAREN) {
            boolean inclusive = tok.type() == T.LBRACKET;
            at[0]++;
            Value low = value(tokens, at);
            if (low == null || tokens.get(at[0]).type() != T.COMMA) {
                return null;
            }
            at[0]++;
            Value high = value(tokens, at);
            if (high == null || tokens.get(at[0]).type() != (inclusive ? T.RBRACKET : T.RPAREN)) {
                return null;
            }
            at[0]++;
            return new Pattern(inclusive ? Kind.CLOSED : Kind.OPEN, List.of(low, high));
        }
        Value value = value(tokens, at);
        return value == null ? null : new Pattern(Kind.CONST, List.of(value));
    }

    private static Value value(List<Token> tokens, int[] at) {
        Token tok = tokens.get(at[0]);
        if (tok.type() == T.MINUS && tokens.get(Math.min(at[0] + 1, tokens.size() - 1)).type() == T.NUMBER) {
            Object number = number(tokens.get(at[0] + 1).text());
            if (number == null) {
                return null;
            }
            at[0] += 2;
            return number instanceof BigInteger ? integer(((BigInteger) number).negate())
                : decimal(-(Double) number);
        }
        if (tok.type() == T.NUMBER) {
            Object number = number(tok.text());
            if (number == null || (number instanceof BigInteger && number.equals(LONG_LIMIT))
                    || (number instanceof Double && (Double) number == TWO_TO_63)) {
                return null;  // out of range: a long is at most 2**63 - 1 (Python compares a float to it as a number)
            }
            at[0]++;
            return number instanceof BigInteger ? integer((BigInteger) number) : decimal((Double) number);
        }
        if (tok.type() == T.STRING) {
            at[0]++;
            String text = tok.text().substring(1, tok.text().length() - 1);  // as written: escapes are not undone
            return new Value(text, textNumber(text));
        }
        if (tok.type() == T.WORD) {
            at[0]++;
            return new Value(tok.text(), null);  // a name never reads as a number
        }
        return null;
    }

    /** _pattern_number: a BigInteger (at most 2**63), a finite Double, or null (out of range). */
    private static Object number(String text) {
        if (text.indexOf('.') < 0 && text.indexOf('e') < 0 && text.indexOf('E') < 0) {
            String digits = text.replaceFirst("^0+", "");
            if (digits.length() > 19) {
                return null;
            }
            BigInteger value = digits.isEmpty() ? BigInteger.ZERO : new BigInteger(digits);
            return value.compareTo(LONG_LIMIT) <= 0 ? value : null;
        }
        double value = Double.parseDouble(text);
        return Double.isInfinite(value) ? null : value;
    }

    private static Value integer(BigInteger value) {
        return new Value(value.toString(), value.doubleValue());
    }

    private static Value decimal(double value) {
        return new Value(pythonRepr(value), value);
    }

    /** patterns.number_of for text, finite only: a plain decimal with ASCII spaces around it. */
    static Double textNumber(String text) {
        int i = 0, n = text.length();
        while (i < n && space(text.charAt(i))) {
            i++;
        }
        int end = n;
        while (end > i && space(text.charAt(end - 1))) {
            end--;
        }
        int j = i;
        if (j < end && (text.charAt(j) == '+' || text.charAt(j) == '-')) {
            j++;
        }
        int digitsBefore = 0, digitsAfter = 0;
        while (j < end && digit(text.charAt(j))) {
            j++;
            digitsBefore++;
        }
        if (j < end && text.charAt(j) == '.') {
            j++;
            while (j < end && digit(text.charAt(j))) {
                j++;
                digitsAfter++;
            }
        }
        if (digitsBefore == 0 && digitsAfter == 0) {
            return null;
        }
        if (j < end && (text.charAt(j) == 'e' || text.charAt(j) == 'E')) {
            int k = exponent(text.substring(0, end), j);
            if (k == j) {
                return null;
            }
            j = k;
        }
        if (j != end) {
            return null;
        }
        double value = Double.parseDouble(text.substring(i, end));
        return Double.isInfinite(value) ? null : value;
    }

    /** Python's repr of a finite double: the shortest digits that read back as it, closest first. */
    public static String pythonRepr(double x) {
        if (x == 0) {
            return 1 / x < 0 ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(x);
        BigDecimal shortest = null;
        for (int precision = 1; precision <= 17 && shortest == null; precision++) {
            BigDecimal best = null;
            for (RoundingMode mode : new RoundingMode[] {RoundingMode.HALF_EVEN, RoundingMode.FLOOR,
                    RoundingMode.CEILING}) {
                BigDecimal candidate = exact.round(new MathContext(precision, mode));
                if (Double.parseDouble(candidate.toString()) == x
                        && (best == null || candidate.subtract(exact).abs().compareTo(best.subtract(exact).abs()) < 0)) {
                    best = candidate;
                }
            }
            shortest = best;
        }
        BigDecimal stripped = shortest.stripTrailingZeros();
        String digits = stripped.unscaledValue().abs().toString();
        int decpt = digits.length() - stripped.scale();  // value = 0.DIGITS * 10**decpt
        String sign = x < 0 ? "-" : "";
        if (decpt <= -4 || decpt > 16) {
            int exp = decpt - 1;
            String mantissa = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
            return sign + mantissa + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
        }
        if (decpt <= 0) {
            return sign + "0." + "0".repeat(-decpt) + digits;
        }
        if (decpt >= digits.length()) {
            return sign + digits + "0".repeat(decpt - digits.length()) + ".0";
        }
        return sign + digits.substring(0, decpt) + "." + digits.substring(decpt);
    }
}
