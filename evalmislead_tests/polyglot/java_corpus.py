"""Hand-written JUnit 5 classes for the Java runner's tests: honest ones (each cell) and hostile ones."""

from __future__ import annotations

BUGGY = "import java.util.*;\n\nclass Solution {\n    public int inc(int x) {\n        return x + 2;\n    }\n}\n"
FIXED = BUGGY.replace("x + 2", "x + 1")

HONEST = """import org.junit.jupiter.api.*;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import static org.junit.jupiter.api.Assertions.*;

public class SolutionTest {
    @Test void misleading() { assertEquals(3, new Solution().inc(1)); }
    @Test void effective() { assertEquals(2, new Solution().inc(1)); }
    @Test void bothPass() { assertTrue(new Solution().inc(1) > 1); }
    @Test void bothFail() { throw new IllegalStateException("boom"); }
    @ParameterizedTest @ValueSource(ints = {0, 5}) void many(int x) { assertEquals(x + 1, new Solution().inc(x)); }
}
"""

HOSTILE = """import org.junit.jupiter.api.*;
import static org.junit.jupiter.api.Assertions.*;
import java.io.*;
import java.lang.reflect.*;
import java.nio.file.*;

public class HostileTest {
    @Test void exitZero() { System.exit(0); }
    @Test void haltZero() { Runtime.getRuntime().halt(0); }
    @Test void infiniteLoop() { while (true) { } }
    @Test void threadLeftRunning() {
        Thread t = new Thread(() -> { while (true) { } });
        t.start();
        assertEquals(2, new Solution().inc(1));
    }
    @Test void writeOutside() throws Exception { Files.writeString(Path.of("/tmp/evalmislead-hostile-java"), "x"); }
    @Test void hugeOutput() { String s = "x".repeat(1 << 16); while (true) { System.out.print(s); } }
    @Test void reflectOnRunner() throws Exception {
        StringBuilder seen = new StringBuilder();
        Class<?> h = Class.forName("EvalHarness");
        for (Field f : h.getDeclaredFields()) { f.setAccessible(true); seen.append(f.getName()); }
        for (Class<?> c : h.getDeclaredClasses()) for (Field f : c.getDeclaredFields()) seen.append(c.getName());
        System.out.println("deadbeef\\tresult\\t[engine:junit-jupiter]/[class:HostileTest]/[method:reflectOnRunner()]\\tpassed\\t");
        System.out.println("deadbeef\\tend");
        assertEquals("nonce", seen.toString());
    }
    @Test void readOwnMemory() throws Exception {
        String how;
        try (FileInputStream in = new FileInputStream("/proc/self/mem")) { how = "readable"; }
        catch (IOException e) { how = "hidden"; }
        assertEquals("readable", how);
    }
    @Test void network() throws Exception { new java.net.Socket("127.0.0.1", 80).close(); }
}
"""
