// Prints, for each set of header names, the order a java.util.HashMap of them
// iterates: the golden hashmap-order.txt, made with
//   java redisstream/testdata/HashMapOrder.java > redisstream/testdata/hashmap-order.txt
import java.util.*;
public class HashMapOrder {
    public static void main(String[] args) {
        String[][] sets = {
            {"id", "__debezium.context.connectorLogicalName", "__debezium.context.taskId", "__debezium.context.connectorName", "__debezium.context.runId"},
            {"__debezium.context.connectorLogicalName", "__debezium.context.taskId", "__debezium.context.connectorName", "__debezium.context.runId", "id", "eventType"},
            {"a", "b", "c", "id", "traceparent", "tracestate", "content-type", "eventType", "aggregateId", "x1", "x2", "x3", "x4", "x5", "café"},
            {"Aa", "BB", "id"},
            {"z", "y", "x", "w", "v", "u", "t", "s", "r", "q", "p", "o", "n", "m", "l", "k", "j", "i", "h", "g", "f", "e", "d", "c", "b", "a", "ZZ", "YY"},
        };
        for (String[] s : sets) {
            Map<String, String> m = new HashMap<>();
            for (String k : s) m.put(k, k);
            System.out.println(String.join(" ", s) + "\t" + String.join(" ", m.keySet()));
        }
    }
}
