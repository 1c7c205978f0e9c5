{{/* The namespace of fracgpu's objects (namespaceOverride, else fracgpu-system). */}}
{{- define "fracgpu.namespace" -}}
{{- .Values.namespaceOverride | default "fracgpu-system" -}}
{{- end -}}

{{/* metadata.labels: the component's (as deploy/), the chart's, global.labels. Call with
     (dict "root" $ "name" "fracgpu-scheduler" "partOf" true). */}}
{{- define "fracgpu.labels" -}}
{{- $r := .root -}}
{{- if .name }}
app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- if .partOf }}
app.kubernetes.io/part-of: fracgpu
{{- end }}
helm.sh/chart: {{ printf "%s-%s" $r.Chart.Name $r.Chart.Version }}
app.kubernetes.io/instance: {{ $r.Release.Name }}
app.kubernetes.io/managed-by: {{ $r.Release.Service }}
app.kubernetes.io/version: {{ $r.Chart.AppVersion | quote }}
{{- with $r.Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from global.annotations (nothing when empty). */}}
{{- define "fracgpu.annotations" -}}
{{- with .Values.global.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* An image of fracgpu: the component's image values over the top-level image values, the
     tag falling back to global.imageTag and then the chart's appVersion; global.imageRegistry
     before all. Call with (dict "root" $ "image" .Values.devicePlugin.image). */}}
{{- define "fracgpu.image" -}}
{{- $r := .root -}}
{{- $c := .image | default dict -}}
{{- $registry := $r.Values.global.imageRegistry | default $c.registry | default $r.Values.image.registry -}}
{{- $repository := $c.repository | default $r.Values.image.repository -}}
{{- $tag := $c.tag | default $r.Values.image.tag | default $r.Values.global.imageTag | default $r.Chart.AppVersion -}}
{{- if $registry -}}{{ $registry }}/{{- end -}}{{ $repository }}:{{ $tag }}
{{- end -}}

{{/* The pull policy of a fracgpu image (same arguments as fracgpu.image). */}}
{{- define "fracgpu.pullPolicy" -}}
{{- $c := .image | default dict -}}
{{- $c.pullPolicy | default .root.Values.image.pullPolicy -}}
{{- end -}}

{{/* kube-scheduler's image: its tag, else the cluster's version (vMAJOR.MINOR.PATCH of the
     API server, without a distribution's suffix such as -eks-…). */}}
{{- define "fracgpu.kubeSchedulerImage" -}}
{{- $r := . -}}
{{- $i := $r.Values.scheduler.kubeScheduler.image -}}
{{- $registry := $r.Values.global.imageRegistry | default $i.registry -}}
{{- $tag := $i.tag | default (regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" $r.Capabilities.KubeVersion.Version) -}}
{{- if $registry -}}{{ $registry }}/{{- end -}}{{ $i.repository }}:{{ $tag }}
{{- end -}}

{{/* imagePullSecrets of every pod (global.imagePullSecrets: names or {name: …}). */}}
{{- define "fracgpu.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
{{- if kindIs "string" . }}
- name: {{ . }}
{{- else }}
- {{ toJson . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The host folder of libvgpu.so: <global.gpuHookPath>/vgpu; devicePlugin.libPath may only
     repeat it. */}}
{{- define "fracgpu.libPath" -}}
{{- $want := printf "%s/vgpu" (trimSuffix "/" .Values.global.gpuHookPath) -}}
{{- with .Values.devicePlugin.libPath -}}
{{- if ne (trimSuffix "/" .) $want -}}
{{- fail (printf "devicePlugin.libPath %q must be <global.gpuHookPath>/vgpu (%s): fracgpu's device plugin mounts <hook path>/vgpu into GPU containers; set global.gpuHookPath instead" . $want) -}}
{{- end -}}
{{- end -}}
{{- $want -}}
{{- end -}}

{{/* The scheduler's metrics port: the port of scheduler.metricsBindAddress (":9090"). */}}
{{- define "fracgpu.metricsPort" -}}
{{- $p := splitList ":" (toString .Values.scheduler.metricsBindAddress) | last -}}
{{- if not (regexMatch "^[0-9]+$" $p) -}}
{{- fail (printf "scheduler.metricsBindAddress %q: expected [host]:port" .Values.scheduler.metricsBindAddress) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* scheduler.nodeLockExpire (a duration: 300, 300s, 5m, 1h) in seconds; "" when unset. */}}
{{- define "fracgpu.nodeLockSeconds" -}}
{{- $v := toString .Values.scheduler.nodeLockExpire -}}
{{- if $v -}}
{{- $m := regexFindAll "^([0-9]+)(s|m|h)?$" $v 1 -}}
{{- if not $m -}}
{{- fail (printf "scheduler.nodeLockExpire %q: expected a whole number of seconds, minutes or hours (300s, 5m, 1h)" $v) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $v | int -}}
{{- if hasSuffix "m" $v -}}{{ mul $n 60 }}{{- else if hasSuffix "h" $v -}}{{ mul $n 3600 }}{{- else -}}{{ $n }}{{- end -}}
{{- end -}}
{{- end -}}

{{/* Extra arguments of a fracgpu command, one "- arg" line each. HAMi's binaries take klog's
     -v=N and --debug (HAMi's chart's default extraArgs); fracgpu's commands take neither and
     would refuse to start, so the render fails naming the value. Call with
     (dict "args" .Values.devicePlugin.extraArgs "value" "devicePlugin.extraArgs"). */}}
{{- define "fracgpu.extraArgs" -}}
{{- range .args }}
{{- if regexMatch "^(-{1,2}v(=.*)?|--debug)$" (toString .) }}
{{- fail (printf "%s: %q is a flag of HAMi's binaries (klog verbosity, --debug); fracgpu's commands take no such flag (`fracgpu <command> --help`)" $.value (toString .)) }}
{{- end }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The name of the RuntimeClass the chart makes (devicePlugin.createRuntimeClass). */}}
{{- define "fracgpu.runtimeClassName" -}}
{{- .Values.devicePlugin.runtimeClassName | default "nvidia" -}}
{{- end -}}
