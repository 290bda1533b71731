package streamwarden.jvm;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Numbers the lines of each file split as Spark's line reader yields them, in order.
 *
 * <p>Spark's file sources keep no line numbers, and {@code monotonically_increasing_id} is not
 * allowed in a streaming query; but a task reads each split of a file from its first line to
 * its last, so counting the rows of each (file, split start) run within a partition gives
 * every line's place: (file, split start, index). In a split that starts at byte 0 (every
 * file below Spark's split size) the index + 1 is the line number.
 *
 * <p>Each line is also checked here, where its bytes already are, which costs far less
 * than Spark SQL's string functions on long lines: is it UTF-8 (strictly, as Python decodes:
 * no overlong forms, no surrogates), is it blank (only spaces, tabs and CRs; JSON lines
 * allow them around a record), and a CR ending it (CRLF) is dropped.
 *
 * <p>Input columns: {@code _file} string, {@code _block} bigint (the split's first byte),
 * {@code _bytes} binary (the line, undecoded: a line that is not UTF-8 must reach the check
 * intact). Output: the same, {@code _index} bigint (0-based within the split),
 * {@code _utf8} and {@code _blank} booleans.
 */
public final class LineNumbers implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
        return new Iterator<Row>() {
            private String file;
            private long block = -1;
            private long index;

            @Override
            public boolean hasNext() {
                return rows.hasNext();
            }

            @Override
            public Row next() {
                Row row = rows.next();
                String rowFile = row.getString(0);
                long rowBlock = row.getLong(1);
                if (rowBlock != block || !rowFile.equals(file)) {
                    file = rowFile;
                    block = rowBlock;
                    index = 0;
                }
                byte[] bytes = (byte[]) row.get(2);
                if (bytes.length > 0 && bytes[bytes.length - 1] == '\r') {
                    bytes = Arrays.copyOf(bytes, bytes.length - 1);
                }
                return RowFactory.create(rowFile, rowBlock, bytes, index++, isUtf8(bytes), isBlank(bytes));
            }
        };
    }

    static boolean isUtf8(byte[] bytes) {
        for (byte b : bytes) {
            if (b < 0) {  // not ASCII: decode strictly
                CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
                try {
                    decoder.decode(ByteBuffer.wrap(bytes));
                    return true;
                } catch (CharacterCodingException e) {
                    return false;
                }
            }
        }
        return true;
    }

    static boolean isBlank(byte[] bytes) {
        for (byte b : bytes) {
            if (b != ' ' && b != '\t' && b != '\r') {
                return false;
            }
        }
        return true;
    }

    /** {@code input} ({@code _file}, {@code _block}, {@code _bytes}) with each line's {@code _index}. */
    public static Dataset<Row> apply(Dataset<Row> input) {
        StructType out = new StructType()
            .add("_file", DataTypes.StringType, false)
            .add("_block", DataTypes.LongType, false)
            .add("_bytes", DataTypes.BinaryType, true)
            .add("_index", DataTypes.LongType, false)
            .add("_utf8", DataTypes.BooleanType, false)
            .add("_blank", DataTypes.BooleanType, false);
        return input.mapPartitions(new LineNumbers(), Encoders.row(out));
    }
}
