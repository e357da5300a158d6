
import java.util.*;
import org.apache.kafka.common.protocol.types.*;

/** Prints the kafka-python JSON message definition of one of Kafka's generated message classes, read from
 *  its compiled schemas (XData.SCHEMAS, one per version): which fields each version has, in wire order,
 *  which are nullable and which are tagged. The *.json files beside it were printed by it from Apache
 *  Kafka 4.4.0's kafka-clients jar (the project's kafka pom), so they are that release's wire format;
 *  tests/integration/test_group_types.py prints them again and compares.
 *  args: MESSAGE_NAME API_KEY, e.g. StreamsGroupDescribeResponse 89 */
public class SchemaDump {
    static final class F {
        String name; String kind; Integer tag; TreeSet<Integer> versions = new TreeSet<>();
        TreeSet<Integer> nullable = new TreeSet<>(); List<F> children; Object def;
    }
    static String camel(String s) {
        StringBuilder b = new StringBuilder();
        for (String p : s.split("_")) if (!p.isEmpty()) b.append(Character.toUpperCase(p.charAt(0))).append(p.substring(1));
        return b.toString();
    }
    static String scalar(Type t) {
        String n = t.toString();
        if (n.contains("STRING")) return "string";
        if (n.contains("BYTES") || n.contains("RECORDS")) return "bytes";
        switch (n) {
            case "INT8": return "int8"; case "INT16": return "int16"; case "INT32": return "int32";
            case "INT64": return "int64"; case "UINT16": return "uint16"; case "BOOLEAN": return "bool";
            case "UUID": return "uuid"; case "FLOAT64": return "float64"; case "UNSIGNED_INT32": return "uint32";
        }
        throw new RuntimeException("type " + n);
    }
    static void merge(List<F> into, Schema s, int v) throws Exception {
        int pos = 0;
        for (BoundField bf : s.fields()) {
            Field d = bf.def;
            if (d.type instanceof TaggedFields) {
                java.lang.reflect.Field m = TaggedFields.class.getDeclaredField("fields");
                m.setAccessible(true);
                @SuppressWarnings("unchecked") Map<Integer, Field> tagged = (Map<Integer, Field>) m.get(d.type);
                for (Map.Entry<Integer, Field> e : tagged.entrySet()) {
                    F f = add(into, e.getValue(), v, into.size());
                    f.tag = e.getKey();
                }
                continue;
            }
            F f = add(into, d, v, pos);
            pos = into.indexOf(f) + 1;
        }
    }
    static F add(List<F> into, Field d, int v, int pos) throws Exception {
        String name = camel(d.name);
        F f = null;
        for (F x : into) if (x.name.equals(name)) f = x;
        if (f == null) { f = new F(); f.name = name; into.add(Math.min(pos, into.size()), f); }
        f.versions.add(v);
        Type t = d.type;
        if (t.isNullable()) f.nullable.add(v);
        Optional<Type> elem = t.arrayElementType();
        if (elem.isPresent()) {
            Type e = elem.get();
            if (e instanceof Schema) {
                if (f.children == null) f.children = new ArrayList<>();
                f.kind = "[]" + name;
                merge(f.children, (Schema) e, v);
            } else f.kind = "[]" + scalar(e);
        } else if (t instanceof Schema) {
            if (f.children == null) f.children = new ArrayList<>();
            f.kind = name;
            merge(f.children, (Schema) t, v);
        } else {
            f.kind = scalar(t);
            if (d.hasDefaultValue && d.defaultValue != null) f.def = d.defaultValue;
        }
        return f;
    }
    static String range(TreeSet<Integer> vs, int hi) {
        int lo = vs.first(), top = vs.last();
        if (top - lo + 1 != vs.size()) throw new RuntimeException("gaps in " + vs);
        return top == hi ? lo + "+" : (lo == top ? "" + lo : lo + "-" + top);
    }
    static void emit(StringBuilder out, List<F> fs, int hi, String ind) {
        for (int i = 0; i < fs.size(); i++) {
            F f = fs.get(i);
            out.append(ind).append("{ \"name\": \"").append(f.name).append("\", \"type\": \"").append(f.kind)
               .append("\", \"versions\": \"").append(range(f.versions, hi)).append("\"");
            if (!f.nullable.isEmpty()) out.append(", \"nullableVersions\": \"").append(range(f.nullable, hi)).append("\"");
            if (f.tag != null) out.append(", \"taggedVersions\": \"").append(range(f.versions, hi)).append("\", \"tag\": ").append(f.tag);
            if (f.def != null) out.append(", \"default\": \"").append(f.def).append("\"");
            if (f.children != null) { out.append(", \"fields\": [\n"); emit(out, f.children, hi, ind + "  "); out.append(ind).append("]"); }
            out.append(" }").append(i + 1 < fs.size() ? ",\n" : "\n");
        }
    }
    public static void main(String[] a) throws Exception {
        Class<?> c = Class.forName("org.apache.kafka.common.message." + a[0] + "Data");
        Schema[] schemas = (Schema[]) c.getField("SCHEMAS").get(null);
        short lo = c.getField("LOWEST_SUPPORTED_VERSION").getShort(null);
        short hi = c.getField("HIGHEST_SUPPORTED_VERSION").getShort(null);
        List<F> root = new ArrayList<>();
        TreeSet<Integer> flexible = new TreeSet<>();
        for (int v = lo; v <= hi; v++) {
            Schema s = schemas[v];
            if (s == null) continue;
            for (BoundField bf : s.fields()) if (bf.def.type instanceof TaggedFields) flexible.add(v);
            merge(root, s, v);
        }
        StringBuilder out = new StringBuilder();
        out.append("{\n  \"apiKey\": ").append(a[1]).append(",\n  \"type\": \"").append(a[0].endsWith("Request") ? "request" : "response")
           .append("\",\n  \"name\": \"").append(a[0]).append("\",\n  \"validVersions\": \"").append(lo).append("-").append(hi)
           .append("\",\n  \"flexibleVersions\": \"").append(range(flexible, hi)).append("\",\n  \"fields\": [\n");
        emit(out, root, hi, "    ");
        out.append("  ]\n}\n");
        System.out.print("// Printed by SchemaDump.java from the compiled schemas of Apache Kafka's " + a[0] + "Data\n"
            + "// (kafka-clients " + org.apache.kafka.common.utils.internals.AppInfoParser.getVersion() + ", Apache License 2.0).\n" + out);
    }
}
