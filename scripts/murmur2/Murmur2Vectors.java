// scripts/murmur2/Murmur2Vectors.java — reference murmur2 vectors from Kafka itself.
//
// Run with the Java 11+ source launcher and kafka-clients on the class path
// (scripts/murmur2-vectors.sh does this for you):
//
//   java -cp "<libs>/*" scripts/murmur2/Murmur2Vectors.java [role ...]
//   printf 'controller\narchiver\n' | java -cp "<libs>/*" scripts/murmur2/Murmur2Vectors.java
//   java -cp "<libs>/*" scripts/murmur2/Murmur2Vectors.java --kafka-test-vectors
//
// For each role name (arguments, or else stdin one per line, UTF-8; empty lines and a
// trailing CR are skipped) it prints one element of a JSON array:
//
//   {"role": "controller", "murmur2": <signed int32>, "positive": <int>,
//    "partitions": {"1": 0, "2": .., "3": .., "7": .., "10": .., "16": 12, ...}}
//
// where murmur2 = Utils.murmur2(role UTF-8 bytes), positive = Utils.toPositive(murmur2)
// and partitions[n] = positive % n: exactly what Kafka's producer does for a keyed
// record (BuiltInPartitioner.partitionForKey).
//
// Arguments are decoded by the JVM with the platform charset (sun.jnu.encoding), which
// is ASCII under LANG=C/POSIX: non-ASCII role names given as arguments may be mangled.
// Pass such names on stdin (the wrapper script always does).
//
// --kafka-test-vectors prints the cases of Kafka's UtilsTest.testMurmur2 with expected
// and actual values, and exits 1 if any differs.

import org.apache.kafka.common.utils.Utils;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class Murmur2Vectors {
    static final int[] PARTITION_COUNTS = {1, 2, 3, 7, 10, 16, 50, 100, 1000};

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        if (args.length == 1 && args[0].equals("--kafka-test-vectors")) {
            System.exit(testVectors(out));
        }
        List<String> roles = new ArrayList<>(Arrays.asList(args));
        if (roles.isEmpty()) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.endsWith("\r")) line = line.substring(0, line.length() - 1);
                if (!line.isEmpty()) roles.add(line);
            }
        }
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < roles.size(); i++) {
            String role = roles.get(i);
            int h = Utils.murmur2(role.getBytes(StandardCharsets.UTF_8));
            int pos = Utils.toPositive(h);
            sb.append(i == 0 ? "\n  " : ",\n  ");
            sb.append("{\"role\": ").append(quote(role))
              .append(", \"murmur2\": ").append(h)
              .append(", \"positive\": ").append(pos)
              .append(", \"partitions\": {");
            for (int j = 0; j < PARTITION_COUNTS.length; j++) {
                int n = PARTITION_COUNTS[j];
                if (j > 0) sb.append(", ");
                sb.append('"').append(n).append("\": ").append(pos % n);
            }
            sb.append("}}");
        }
        sb.append(roles.isEmpty() ? "]" : "\n]");
        out.println(sb);
        out.flush();
    }

    // Cases of Kafka's UtilsTest.testMurmur2 (clients/src/test/.../common/utils/UtilsTest.java).
    static int testVectors(PrintStream out) {
        Object[][] cases = {
            {"21", -973932308},
            {"foobar", -790332482},
            {"a-little-bit-long-string", -985981536},
            {"a-little-bit-longer-string", -1486304829},
            {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
            {"abc", 479470107}, // new byte[] {'a', 'b', 'c'} in the test
        };
        int bad = 0;
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < cases.length; i++) {
            String s = (String) cases[i][0];
            int want = (Integer) cases[i][1];
            int got = Utils.murmur2(s.getBytes(StandardCharsets.UTF_8));
            if (got != want) bad++;
            sb.append(i == 0 ? "\n  " : ",\n  ")
              .append("{\"input\": ").append(quote(s))
              .append(", \"expected\": ").append(want)
              .append(", \"murmur2\": ").append(got)
              .append(", \"ok\": ").append(got == want).append('}');
        }
        out.println(sb.append("\n]"));
        out.flush();
        return bad == 0 ? 0 : 1;
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
