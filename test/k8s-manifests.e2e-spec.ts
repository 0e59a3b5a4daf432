import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { parseAllDocuments, parse } from 'yaml';
import { ENV_KEYS } from '../src/config/config.schema';
import { loadConfig } from '../src/config/config.loader';
import { REPO_ROOT } from './support/repo-root';

const DIR = join(REPO_ROOT, 'deploy', 'k8s');

/** The typed model of each kind the manifests use; validate() checks the JSON schema. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
};

type Doc = { apiVersion: string; kind: string; metadata: { name: string }; spec: never };

const manifests = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'nats-values.yaml')
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => ({
      file,
      doc: d.toJS() as Doc,
    })),
  );
const byKind = (kind: string) => manifests.find((m) => m.doc.kind === kind)!.doc as never;

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    privileged?: boolean;
    readOnlyRootFilesystem?: boolean;
    runAsNonRoot?: boolean;
    seccompProfile?: { type?: string };
  };
  startupProbe?: { timeoutSeconds?: number };
  livenessProbe?: { timeoutSeconds?: number };
  readinessProbe?: { timeoutSeconds?: number };
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  enableServiceLinks?: boolean;
  hostNetwork?: boolean;
  securityContext?: { runAsNonRoot?: boolean; seccompProfile?: { type?: string } };
  containers: Container[];
}
interface DeploymentDoc {
  metadata: { name: string };
  spec: { replicas?: number; template: { spec: PodSpec } };
}

/**
 * Policy rules written from the Kubernetes docs, each returning what a Deployment breaks:
 * Pod Security "restricted" (pod-security-standards: runAsNonRoot, seccompProfile
 * RuntimeDefault or Localhost, allowPrivilegeEscalation false, capabilities drop ALL, no
 * added capability but NET_BIND_SERVICE, not privileged, no host network), probe timeouts
 * set, no `replicas` beside an autoscaler, a grace period that covers preStop + the
 * service's drain (EPD_SHUTDOWN_GRACE_MS + EPD_DRAIN_MS, its own defaults where unset) +
 * 5 s, and no service links.
 */
function violations(d: DeploymentDoc, autoscaled: boolean): string[] {
  const out: string[] = [];
  const pod = d.spec.template.spec;
  if (autoscaled && d.spec.replicas !== undefined) out.push('replicas beside an autoscaler');
  if (pod.enableServiceLinks !== false) out.push('service links on');
  if (pod.hostNetwork) out.push('host network');
  for (const c of pod.containers) {
    const sc = c.securityContext ?? {};
    const at = `container ${c.name}`;
    if (!(sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot)) out.push(`${at}: runAsNonRoot`);
    const seccomp = sc.seccompProfile?.type ?? pod.securityContext?.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') out.push(`${at}: seccompProfile`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`${at}: allowPrivilegeEscalation`);
    if (!sc.capabilities?.drop?.includes('ALL')) out.push(`${at}: capabilities.drop ALL`);
    if ((sc.capabilities?.add ?? []).some((cap) => cap !== 'NET_BIND_SERVICE'))
      out.push(`${at}: capabilities.add`);
    if (sc.privileged) out.push(`${at}: privileged`);
    // Not Pod Security "restricted" itself, but what the issue asks of the image.
    if (sc.readOnlyRootFilesystem !== true) out.push(`${at}: readOnlyRootFilesystem`);
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const)
      if (c[probe] && !c[probe].timeoutSeconds) out.push(`${at}: ${probe}.timeoutSeconds`);
    const env = Object.fromEntries(
      (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
    );
    const { shutdown } = loadConfig(env).config;
    const needS =
      (c.lifecycle?.preStop?.sleep?.seconds ?? 0) +
      (shutdown.graceMs + shutdown.drainMs) / 1000 +
      5;
    if ((pod.terminationGracePeriodSeconds ?? 30) < needS)
      out.push(`terminationGracePeriodSeconds < ${needS} (preStop + grace + drain + 5 s)`);
  }
  return out;
}

/**
 * "Autoscaling": the Kubernetes manifests in deploy/k8s are checked against the
 * Kubernetes and KEDA schemas with the typed models of `kubernetes-models`, not by eye,
 * and against the service itself (its probes, its settings, its drain).
 */
describe('Kubernetes manifests (deploy/k8s)', () => {
  it.each(manifests.map((m) => [`${m.file}: ${m.doc.kind}`, m.doc] as const))(
    '%s is valid against its schema',
    (_name, doc) => {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(Model).toBeDefined();
      expect(() => new Model!(doc as never).validate()).not.toThrow();
    },
  );

  it('the schemas refuse a broken manifest (so the checks above can fail)', () => {
    const d = structuredClone(byKind('Deployment')) as { spec: { template?: unknown } };
    delete d.spec.template;
    expect(() => new Deployment(d as never).validate()).toThrow(/template/);
    const k = structuredClone(byKind('ScaledObject')) as { spec: { triggers: unknown } };
    k.spec.triggers = 'prometheus';
    expect(() => new ScaledObject(k as never).validate()).toThrow(/triggers/);
  });

  it('the kustomization lists files that exist, and one autoscaler only', () => {
    const k = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as {
      resources: string[];
    };
    for (const r of k.resources) expect(readdirSync(DIR)).toContain(r);
    const scalers = k.resources.filter((r) => /keda|hpa/.test(r));
    expect(scalers).toHaveLength(1);
  });

  it('the Deployment matches the service: probes, settings it knows, a drain that fits', () => {
    const d = byKind('Deployment') as {
      spec: {
        template: {
          spec: {
            terminationGracePeriodSeconds: number;
            containers: {
              env: { name: string; value?: string }[];
              livenessProbe: { httpGet: { path: string } };
              readinessProbe: { httpGet: { path: string } };
              lifecycle: { preStop: { sleep: { seconds: number } } };
            }[];
          };
        };
      };
    };
    const pod = d.spec.template.spec;
    const c = pod.containers[0]!;
    expect(c.livenessProbe.httpGet.path).toBe('/health/live');
    expect(c.readinessProbe.httpGet.path).toBe('/health/ready');
    // Every EPD_ variable it sets is one the service reads (a typo would be ignored).
    for (const e of c.env) if (e.name.startsWith('EPD_')) expect(ENV_KEYS).toHaveProperty(e.name);
    const env = (name: string) => Number(c.env.find((e) => e.name === name)?.value);
    const drainS = c.lifecycle.preStop.sleep.seconds + env('EPD_SHUTDOWN_GRACE_MS') / 1000;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(drainS);
    // The autoscaler's bounds are the signal's.
    const keda = byKind('ScaledObject') as {
      spec: { minReplicaCount: number; maxReplicaCount: number; scaleTargetRef: { name: string } };
    };
    expect(keda.spec.scaleTargetRef.name).toBe('epd-encoder');
    expect(keda.spec.minReplicaCount).toBe(env('EPD_SCALE_MIN'));
    expect(keda.spec.maxReplicaCount).toBe(env('EPD_SCALE_MAX'));
    const hpa = byKind('HorizontalPodAutoscaler') as {
      spec: { minReplicas: number; maxReplicas: number };
    };
    expect([hpa.spec.minReplicas, hpa.spec.maxReplicas]).toEqual([
      env('EPD_SCALE_MIN'),
      env('EPD_SCALE_MAX'),
    ]);
  });

  it('the Deployment meets the policy rules (Pod Security restricted, probe timeouts, no replicas, a grace that fits)', () => {
    expect(violations(byKind('Deployment'), true)).toEqual([]);
  });

  it.each([
    ['replicas beside an autoscaler', (d: DeploymentDoc) => (d.spec.replicas = 2)],
    ['service links on', (d: DeploymentDoc) => delete d.spec.template.spec.enableServiceLinks],
    ['seccompProfile', (d: DeploymentDoc) => delete d.spec.template.spec.securityContext],
    [
      'allowPrivilegeEscalation',
      (d: DeploymentDoc) => delete d.spec.template.spec.containers[0]!.securityContext,
    ],
    [
      'readOnlyRootFilesystem',
      (d: DeploymentDoc) =>
        delete d.spec.template.spec.containers[0]!.securityContext!.readOnlyRootFilesystem,
    ],
    [
      'readinessProbe.timeoutSeconds',
      (d: DeploymentDoc) =>
        delete d.spec.template.spec.containers[0]!.readinessProbe!.timeoutSeconds,
    ],
    [
      'terminationGracePeriodSeconds <',
      (d: DeploymentDoc) => (d.spec.template.spec.terminationGracePeriodSeconds = 20),
    ],
  ])('a copy broken by %s is refused', (rule, breakIt) => {
    const d = structuredClone(byKind('Deployment')) as DeploymentDoc;
    breakIt(d);
    expect(violations(d, true).join('; ')).toContain(rule);
  });

  it('the autoscaler, the monitor and the image fit the kustomization: namespace-scoped query, no null as 0, a fallback, one edit for the image', () => {
    const k = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as {
      namespace: string;
      images: { name: string; newName: string; newTag: string }[];
    };
    const keda = byKind('ScaledObject') as {
      spec: {
        fallback?: { failureThreshold: number; replicas: number };
        minReplicaCount: number;
        triggers: { metadata: { query: string; ignoreNullValues?: string } }[];
      };
    };
    const trigger = keda.spec.triggers[0]!.metadata;
    expect(trigger.query).toContain(`namespace="${k.namespace}"`);
    expect(trigger.ignoreNullValues).toBe('false');
    expect(keda.spec.fallback?.replicas).toBeGreaterThanOrEqual(keda.spec.minReplicaCount);
    const d = byKind('Deployment') as {
      spec: {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { image: string; ports: { name: string }[] }[] };
        };
      };
    };
    const c = d.spec.template.spec.containers[0]!;
    expect(k.images.map((i) => i.name)).toContain(c.image.split(':')[0]);
    const pm = byKind('PodMonitor') as {
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    };
    expect(d.spec.template.metadata.labels).toMatchObject(pm.spec.selector.matchLabels);
    expect(c.ports.map((p) => p.name)).toContain(pm.spec.podMetricsEndpoints[0]!.port);
    expect(pm.spec.podMetricsEndpoints[0]!.path).toBe('/metrics');
  });

  it('the NATS Helm values ask for a 3-node cluster with JetStream on files', () => {
    // The chart publishes no schema package on npm: its values are checked for what the
    // encoder needs (EPD_KV_REPLICAS=3), not against a schema.
    const v = parse(readFileSync(join(DIR, 'nats-values.yaml'), 'utf8')) as {
      config: {
        cluster: { enabled: boolean; replicas: number };
        jetstream: { enabled: boolean; fileStore: { enabled: boolean } };
      };
    };
    expect(v.config.cluster).toMatchObject({ enabled: true, replicas: 3 });
    expect(v.config.jetstream).toMatchObject({ enabled: true, fileStore: { enabled: true } });
  });

  it("NATS's network policy lets the encoders and labelled clients in on the client port, and nothing else", () => {
    const nats = manifests.find((m) => m.file === 'nats-networkpolicy.yaml')!.doc as unknown as {
      metadata: { namespace: string };
      spec: {
        ingress: {
          from: {
            namespaceSelector?: { matchLabels?: Record<string, string> };
            podSelector?: { matchLabels?: Record<string, string> };
          }[];
          ports: { port: number }[];
        }[];
      };
    };
    const d = byKind('Deployment') as {
      spec: { template: { metadata: { labels: Record<string, string> } } };
    };
    const k = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as {
      namespace: string;
      resources: string[];
    };
    // Applied in NATS's namespace, not through the encoders' kustomization.
    expect(k.resources).not.toContain('nats-networkpolicy.yaml');
    expect(nats.metadata.namespace).toBe('nats');
    const client = nats.spec.ingress.filter((r) => r.ports.some((p) => p.port === 4222));
    const fromEncoders = client.some((r) =>
      r.from.some(
        (f) =>
          f.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === k.namespace &&
          Object.entries(f.podSelector?.matchLabels ?? {}).every(
            ([key, v]) => d.spec.template.metadata.labels[key] === v,
          ),
      ),
    );
    expect(fromEncoders).toBe(true);
    // No rule admits everyone: each source names a namespace or pod label.
    for (const r of nats.spec.ingress)
      for (const f of r.from)
        expect(
          Object.keys(f.podSelector?.matchLabels ?? {}).length +
            Object.keys(f.namespaceSelector?.matchLabels ?? {}).length,
        ).toBeGreaterThan(0);
  });

  it('the handoff is on, and its buckets fit the JetStream volume the NATS values ask for', () => {
    const d = byKind('Deployment') as DeploymentDoc;
    const v = parse(readFileSync(join(DIR, 'nats-values.yaml'), 'utf8')) as {
      config: { jetstream: { fileStore: { pvc: { size: string } } } };
    };
    const volume = v.config.jetstream.fileStore.pvc.size;
    expect(bucketViolations(d, volume)).toEqual([]);
    const env = d.spec.template.spec.containers[0]!.env!;
    expect(env.find((e) => e.name === 'EPD_CACHE_STORE')?.value).toBe('jetstream');
    // The defaults (8 GiB a bucket) did not fit: shown refused.
    const big = structuredClone(d);
    big.spec.template.spec.containers[0]!.env = env.filter((e) => e.name !== 'EPD_OBJ_MAX_BYTES');
    expect(bucketViolations(big, volume)).toEqual([
      'object store buckets reserve 2 × 8.0 GiB + 1 GiB for the KV buckets = 17.0 GiB > the JetStream volume (10Gi)',
    ]);
  });

  it("the NATS Helm values authorize deploy/nats/roles.conf's four roles, with every password from a Secret", () => {
    const text = readFileSync(join(DIR, 'nats-values.yaml'), 'utf8');
    expect(natsAuthViolations(parse(text) as NatsValues)).toEqual([]);
    // The Deployment connects as one of them.
    const d = parse(readFileSync(join(DIR, 'deployment.yaml'), 'utf8')) as DeploymentDoc;
    const env = d.spec.template.spec.containers[0]!.env as { name: string; value?: string }[];
    expect(env.find((e) => e.name === 'EPD_NATS_USER')?.value).toBe('encoder');
    // And the rules refuse what they are for: a literal password, a variable no Secret
    // fills, a role that drifted from roles.conf, a role left out.
    const broken = (edit: (v: NatsValues) => void) => {
      const v = parse(text) as NatsValues;
      edit(v);
      return natsAuthViolations(v);
    };
    expect(broken((v) => (v.config.merge.authorization.users[0]!.password = 'hunter2'))).toEqual([
      'user encoder: password is not a << $VARIABLE >> reference',
    ]);
    expect(broken((v) => delete v.container.env.EPD_PREFILL_PASS)).toEqual([
      'user prefill: $EPD_PREFILL_PASS is not filled from a Secret (container.env)',
    ]);
    expect(
      broken((v) =>
        v.config.merge.authorization.users[1]!.permissions.publish.push('epd.v1.encode'),
      ),
    ).toEqual(['user prefill: permissions differ from PREFILL in deploy/nats/roles.conf']);
    expect(broken((v) => v.config.merge.authorization.users.pop())).toEqual([
      'role ADMIN (user admin) is missing',
    ]);
  });
});

interface NatsValues {
  config: {
    merge: {
      authorization: {
        users: {
          user: string;
          password: string;
          permissions: { publish: string[]; subscribe: string[] };
        }[];
      };
    };
  };
  container: { env: Record<string, { valueFrom?: { secretKeyRef?: { name: string } } }> };
}

/** deploy/nats/roles.conf's roles: publish and subscribe subjects, by role name. */
function rolesConf(): Map<string, { publish: string[]; subscribe: string[] }> {
  const text = readFileSync(join(DIR, '..', 'nats', 'roles.conf'), 'utf8');
  const subjects = (block: string, key: string) =>
    [
      ...(new RegExp(`${key}\\s*=\\s*\\[([\\s\\S]*?)\\]`).exec(block)?.[1] ?? '').matchAll(
        /"([^"]+)"/g,
      ),
    ].map((m) => m[1]!);
  const roles = new Map<string, { publish: string[]; subscribe: string[] }>();
  for (const m of text.matchAll(/^ {2}([A-Z]+) = \{([\s\S]*?)\n {2}\}/gm))
    roles.set(m[1]!, {
      publish: subjects(m[2]!, 'publish'),
      subscribe: subjects(m[2]!, 'subscribe'),
    });
  return roles;
}

/** What the chart values get wrong about authorization, one line per problem. */
function natsAuthViolations(v: NatsValues): string[] {
  const out: string[] = [];
  const users = v.config.merge.authorization.users;
  const roles = rolesConf();
  if (roles.size !== 4) out.push(`roles.conf has ${roles.size} roles, 4 expected`);
  for (const [role, perms] of roles) {
    const name = role.toLowerCase();
    const u = users.find((x) => x.user === name);
    if (!u) {
      out.push(`role ${role} (user ${name}) is missing`);
      continue;
    }
    const variable = /^<< \$([A-Z_][A-Z0-9_]*) >>$/.exec(u.password)?.[1];
    if (!variable) out.push(`user ${name}: password is not a << $VARIABLE >> reference`);
    else if (!v.container.env[variable]?.valueFrom?.secretKeyRef?.name)
      out.push(`user ${name}: $${variable} is not filled from a Secret (container.env)`);
    if (JSON.stringify(u.permissions) !== JSON.stringify(perms))
      out.push(`user ${name}: permissions differ from ${role} in deploy/nats/roles.conf`);
  }
  return out;
}

type Obj = Record<string, unknown>;
type Named = Obj & { name?: string; mountPath?: string };

/**
 * `kubectl kustomize` for what the overlays use (Debian's kubectl is too old to have it,
 * and no other build is reachable): resources (files, and directories rendered the same
 * way), then strategic merge patches of the Deployment, which merge containers by name,
 * env entries and volumes by name, and volumeMounts by mountPath, as Kubernetes' patch
 * strategy for those lists does; other fields of a patch replace the base's.
 */
function renderKustomization(dir: string): Doc[] {
  const k = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as {
    resources?: string[];
    patches?: { path: string }[];
  };
  const docs: Doc[] = [];
  for (const r of k.resources ?? []) {
    const path = join(dir, r);
    if (!r.endsWith('.yaml')) docs.push(...renderKustomization(path));
    else docs.push(...parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJS() as Doc));
  }
  for (const p of k.patches ?? []) {
    const patch = parse(readFileSync(join(dir, p.path), 'utf8')) as Doc;
    const target = docs.find(
      (d) => d.kind === patch.kind && d.metadata.name === patch.metadata.name,
    );
    if (!target) throw new Error(`${p.path}: no ${patch.kind} ${patch.metadata.name} to patch`);
    mergeInto(target, patch);
  }
  return docs;
}

/** Kubernetes' merge keys for the lists the patches touch. */
const MERGE_KEYS: Record<string, 'name' | 'mountPath'> = {
  containers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
};

function mergeInto(base: Obj, patch: Obj): void {
  for (const [key, value] of Object.entries(patch)) {
    const key_ = MERGE_KEYS[key];
    if (key_ && Array.isArray(value)) {
      const list = ((base[key] as Named[] | undefined) ?? []).slice();
      for (const item of value as Named[]) {
        const at = list.findIndex((b) => b[key_] === item[key_]);
        if (at < 0) list.push(item);
        else if (key === 'containers') mergeInto(list[at]!, item);
        else list[at] = item;
      }
      base[key] = list;
    } else if (value && typeof value === 'object' && !Array.isArray(value) && base[key]) {
      mergeInto(base[key] as Obj, value as Obj);
    } else {
      base[key] = value;
    }
  }
}

/** What a rendered overlay gets wrong, beyond the base's policy rules. */
function overlayViolations(docs: Doc[]): string[] {
  const out: string[] = [];
  for (const d of docs) {
    const Model = MODELS[`${d.apiVersion}/${d.kind}`];
    if (!Model) out.push(`${d.kind} ${d.metadata.name}: no schema to check it against`);
    else
      try {
        new Model(d as never).validate();
      } catch (err) {
        out.push(`${d.kind} ${d.metadata.name}: ${(err as Error).message}`);
      }
  }
  const d = docs.find((x) => x.kind === 'Deployment') as unknown as DeploymentDoc & {
    spec: {
      template: {
        spec: PodSpec & {
          volumes?: { name: string; persistentVolumeClaim?: { claimName: string } }[];
          containers: (Container & { volumeMounts?: { name: string }[] })[];
        };
      };
    };
  };
  const pod = d.spec.template.spec;
  let settingsLoad = true;
  for (const c of pod.containers) {
    for (const e of c.env ?? [])
      if (e.name.startsWith('EPD_') && !(e.name in ENV_KEYS))
        out.push(`${e.name}: not a variable the service reads`);
    const env = Object.fromEntries(
      (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
    );
    try {
      loadConfig(env);
    } catch (err) {
      settingsLoad = false;
      out.push(`the service refuses its settings: ${(err as Error).message}`);
    }
    for (const m of c.volumeMounts ?? [])
      if (!(pod.volumes ?? []).some((v) => v.name === m.name))
        out.push(`volumeMount ${m.name}: no such volume`);
  }
  // The base's rules (they read the drain from the settings, so only once those load).
  if (settingsLoad) out.push(...violations(d, true));
  return out;
}

describe('overlays (deploy/k8s/overlays), rendered over the base', () => {
  it.each([
    ['sglang', { EPD_TRANSFER_BACKEND: 'zmq', EPD_STAGING_DTYPE: 'bfloat16' }],
    ['vllm', { EPD_VLLM_EC_PATH: '/ec', EPD_STAGING_DTYPE: 'bfloat16' }],
  ])(
    '%s: every document passes its schema, the Deployment the base policy rules, and the service loads its settings',
    (name, expected) => {
      const docs = renderKustomization(join(DIR, 'overlays', name));
      expect(overlayViolations(docs)).toEqual([]);
      const d = docs.find((x) => x.kind === 'Deployment') as unknown as DeploymentDoc;
      const env = d.spec.template.spec.containers[0]!.env!;
      for (const [k, v] of Object.entries(expected))
        expect(env.filter((e) => e.name === k).map((e) => e.value)).toEqual([v]);
      // The base's settings are still there (merged, not replaced).
      expect(env.map((e) => e.name)).toContain('EPD_ALLOWED_DESTINATIONS');
    },
  );

  it("the vLLM overlay's volume is the claim it ships, mounted where EPD_VLLM_EC_PATH points", () => {
    const docs = renderKustomization(join(DIR, 'overlays', 'vllm'));
    const pvc = docs.find((x) => x.kind === 'PersistentVolumeClaim')!;
    const d = docs.find((x) => x.kind === 'Deployment') as unknown as {
      spec: {
        template: {
          spec: {
            volumes: { name: string; persistentVolumeClaim?: { claimName: string } }[];
            containers: { volumeMounts: { name: string; mountPath: string }[] }[];
          };
        };
      };
    };
    const pod = d.spec.template.spec;
    const ec = pod.volumes.find((v) => v.persistentVolumeClaim?.claimName === pvc.metadata.name);
    expect(ec).toBeDefined();
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: ec!.name, mountPath: '/ec' });
    // The base's model volume is kept beside it.
    expect(pod.volumes.map((v) => v.name)).toContain('models');
  });

  it('the rules refuse a broken overlay: an unknown variable, a setting the service refuses, a mount without a volume', () => {
    const docs = () => renderKustomization(join(DIR, 'overlays', 'vllm'));
    const container = (x: Doc[]) =>
      (x.find((y) => y.kind === 'Deployment') as unknown as DeploymentDoc).spec.template.spec
        .containers[0]! as Container & { volumeMounts: { name: string; mountPath: string }[] };
    const typo = docs();
    container(typo).env!.push({ name: 'EPD_VLLM_EC_PAHT', value: '/ec' });
    expect(overlayViolations(typo)).toEqual(['EPD_VLLM_EC_PAHT: not a variable the service reads']);
    const refused = docs();
    container(refused).env!.push({ name: 'EPD_STAGING_DTYPE', value: 'int8' });
    expect(overlayViolations(refused).join('; ')).toContain('the service refuses its settings');
    const dangling = docs();
    container(dangling).volumeMounts.push({ name: 'nowhere', mountPath: '/nowhere' });
    expect(overlayViolations(dangling)).toEqual(['volumeMount nowhere: no such volume']);
  });
});

/** Bytes of a Kubernetes quantity in binary units (`10Gi`, `512Mi`). */
function quantityBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|Ti)$/.exec(q);
  if (!m) throw new Error(`unsupported quantity ${q}`);
  return Number(m[1]) * 1024 ** (['Ki', 'Mi', 'Gi', 'Ti'].indexOf(m[2]!) + 1);
}

/**
 * With the object store tier on, JetStream reserves each bucket's max bytes at creation on
 * every node that holds a replica: the cache and staged buckets (EPD_OBJ_MAX_BYTES each)
 * and 1 GiB for the KV buckets (metadata, roster, claims) must fit the volume.
 */
function bucketViolations(d: DeploymentDoc, volume: string): string[] {
  const env = Object.fromEntries(
    (d.spec.template.spec.containers[0]!.env ?? [])
      .filter((e) => e.value !== undefined)
      .map((e) => [e.name, e.value!]),
  );
  const { cache } = loadConfig(env).config;
  if (cache.store !== 'jetstream') return [];
  const gib = (n: number) => (n / 2 ** 30).toFixed(1);
  const need = 2 * cache.objMaxBytes + 2 ** 30;
  return need > quantityBytes(volume)
    ? [
        `object store buckets reserve 2 × ${gib(cache.objMaxBytes)} GiB + 1 GiB for the KV buckets = ${gib(need)} GiB > the JetStream volume (${volume})`,
      ]
    : [];
}
