// The Java harness: runs JUnit 5 (the JUnit Platform Launcher API) on one test class in a JVM of its own.
//
//   java -cp <junit standalone>:. EvalHarness collect <TestClass>
//   java -cp <junit standalone>:. EvalHarness run <TestClass> <uniqueId>
//
// It reads the run's nonce from stdin before any test class loads (a local variable and a private field of
// the listener, never a static), keeps its own stream on descriptor 1, and writes only lines that start with
// the nonce: `collected\t<uniqueId>` per test (a @Test method; each invocation of a @ParameterizedTest or
// other template, found by running the class with every test body disabled: SkipBodies), `result\t<uniqueId>\t<passed|failed|error>\t<detail>` for the selected id
// (its own outcome and every descendant's: a parameterized invocation that fails fails the template), then
// `end`, and halts the JVM (threads a test left running die with it). A test that ends the JVM
// (System.exit, Runtime.halt) leaves no result line: no positive evidence, no pass.
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

public final class EvalHarness {
    private EvalHarness() {}

    private static final class Verdict implements TestExecutionListener {
        private final String target;
        private String status = null;
        private String detail = "";

        Verdict(String target) { this.target = target; }

        @Override
        public void executionFinished(TestIdentifier id, TestExecutionResult result) {
            String uid = id.getUniqueId();
            if (!uid.equals(target) && !uid.startsWith(target + "/")) return;
            TestExecutionResult.Status s = result.getStatus();
            if (s == TestExecutionResult.Status.SUCCESSFUL) {
                if (uid.equals(target) && status == null) status = "passed";
                return;
            }
            String word = s == TestExecutionResult.Status.ABORTED ? "error" : "failed";
            if (!"failed".equals(status)) {
                status = word;
                Throwable t = result.getThrowable().orElse(null);
                detail = t == null ? word : (t.getClass().getName() + ": " + t.getMessage());
            }
        }

        @Override
        public void executionSkipped(TestIdentifier id, String reason) {
            if (id.getUniqueId().equals(target)) { status = "error"; detail = "skipped: " + reason; }
        }
    }

    private static String clean(String s) {
        String t = s == null ? "" : s.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
        return t.length() > 600 ? t.substring(0, 600) : t;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String nonce = in.readLine();
        in.close();
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        if (nonce == null || nonce.isEmpty()) Runtime.getRuntime().halt(3);
        Launcher launcher = LauncherFactory.create();
        LauncherDiscoveryRequest request;
        if (args[0].equals("collect")) {
            request = LauncherDiscoveryRequestBuilder.request()
                .selectors(DiscoverySelectors.selectClass(args[1]))
                .configurationParameter("junit.jupiter.extensions.autodetection.enabled", "true").build();
            Collector collector = new Collector();
            launcher.execute(request, collector);
            for (String id : collector.ids()) out.println(nonce + "\tcollected\t" + clean(id));
        } else {
            request = LauncherDiscoveryRequestBuilder.request()
                .selectors(DiscoverySelectors.selectUniqueId(args[2])).build();
            Verdict verdict = new Verdict(args[2]);
            launcher.execute(request, verdict);
            String status = verdict.status == null ? "error" : verdict.status;
            String detail = verdict.status == null ? "not run (no such test)" : verdict.detail;
            out.println(nonce + "\tresult\t" + clean(args[2]) + "\t" + status + "\t" + clean(detail));
        }
        out.println(nonce + "\tend");
        out.flush();
        Runtime.getRuntime().halt(0);
    }

    /** Collection: the plan's tests, and each template's invocations in place of the template. */
    private static final class Collector implements TestExecutionListener {
        private final List<String> planned = new ArrayList<>();
        private final Map<String, List<String>> invocations = new HashMap<>();

        @Override
        public void testPlanExecutionStarted(TestPlan plan) {
            for (TestIdentifier root : plan.getRoots()) walk(plan, root);
        }

        private void walk(TestPlan plan, TestIdentifier id) {
            Set<TestIdentifier> children = plan.getChildren(id);
            if (children.isEmpty() && id.getSource().isPresent()) planned.add(id.getUniqueId());
            for (TestIdentifier child : children) walk(plan, child);
        }

        @Override
        public void dynamicTestRegistered(TestIdentifier id) {
            String uid = id.getUniqueId();
            int cut = uid.lastIndexOf("/[test-template-invocation:");
            if (cut >= 0) invocations.computeIfAbsent(uid.substring(0, cut), k -> new ArrayList<>()).add(uid);
        }

        List<String> ids() {
            List<String> out = new ArrayList<>();
            for (String id : planned) out.addAll(invocations.getOrDefault(id, List.of(id)));
            return out;
        }
    }

    /** Loaded only while collecting (extension autodetection): no test body runs, templates still expand. */
    public static final class SkipBodies implements ExecutionCondition {
        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            String uid = context.getUniqueId();
            String last = uid.substring(uid.lastIndexOf('/') + 1);
            if (last.startsWith("[class:") || last.startsWith("[nested-class:") || last.startsWith("[test-template:")
                    || last.startsWith("[engine:")) {
                return ConditionEvaluationResult.enabled("collecting");
            }
            return ConditionEvaluationResult.disabled("collecting");
        }
    }
}
