#!/usr/bin/env bash
# Generate the cluster's PKI and kubeconfigs under $STATE/pki (kept across
# cluster-down; regenerated only when missing, when the node's name or IP
# changed, or when a certificate expires within a week):
#   ca                          cluster CA (client and serving certs)
#   apiserver                   serving cert: 127.0.0.1, localhost, node name/IP, 10.0.0.1
#   admin                       client, O=system:masters
#   controller-manager, scheduler, kube-proxy   client, their system: users
#   kubelet                     client, CN=system:node:<node>, O=system:nodes
#   kubelet-serving             the kubelet's serving cert (exec/logs from the API server)
#   apiserver-kubelet-client    the API server's client cert towards the kubelet
#   sa                          service-account token signing key pair
set -euo pipefail
. "$(dirname "$0")/lib.sh"

NODE_IP=$(node_ip)
mkdir -p "$PKI"
cd "$PKI"
umask 077

LEAVES=(apiserver kubelet-serving admin apiserver-kubelet-client controller-manager scheduler kube-proxy kubelet)
# valid_for_a_week CERT...: each exists and is still valid a week from now.
valid_for_a_week() {
  local crt
  for crt in "$@"; do
    openssl x509 -checkend 604800 -noout -in "$crt" >/dev/null 2>&1 || return 1
  done
}

stamp="node=$NODE_NAME ip=$NODE_IP"
if [ -f stamp ] && [ "$(cat stamp)" = "$stamp" ] && [ -f "$ADMIN_KUBECONFIG" ] \
  && valid_for_a_week ca.crt "${LEAVES[@]/%/.crt}"; then
  log "PKI up to date in $PKI"
  exit 0
fi
log "generating PKI in $PKI ($stamp)"

if [ ! -f ca.key ] || ! valid_for_a_week ca.crt; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
    -subj "/CN=allocwatch-local-ca" 2>/dev/null
fi

# cert NAME SUBJECT EXTENSIONS: a CA-signed cert valid for a year.
cert() {
  local name=$1 subj=$2 ext=$3
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  printf '%s\n' "$ext" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 365 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
server_ext() {
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$1"
}

cert apiserver "/CN=kube-apiserver" "$(server_ext "IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME,IP:$NODE_IP,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")"
cert kubelet-serving "/CN=$NODE_NAME" "$(server_ext "DNS:$NODE_NAME,IP:$NODE_IP,IP:127.0.0.1,DNS:localhost")"
cert admin "/O=system:masters/CN=kubernetes-admin" "$client_ext"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
cert controller-manager "/CN=system:kube-controller-manager" "$client_ext"
cert scheduler "/CN=system:kube-scheduler" "$client_ext"
cert kube-proxy "/CN=system:kube-proxy" "$client_ext"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client_ext"
if [ ! -f sa.key ]; then
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi

# kubeconfig NAME OUT: a kubeconfig for NAME's client cert, certs embedded.
kubeconfig() {
  local name=$1 out=$2
  cat >"$out" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 ca.crt)
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$name.crt")
    client-key-data: $(base64 -w0 "$name.key")
contexts:
- name: $name@local
  context:
    cluster: local
    user: $name
current-context: $name@local
KCFG
}
kubeconfig admin "$ADMIN_KUBECONFIG"
kubeconfig controller-manager "$STATE/controller-manager.kubeconfig"
kubeconfig scheduler "$STATE/scheduler.kubeconfig"
kubeconfig kube-proxy "$STATE/kube-proxy.kubeconfig"
kubeconfig kubelet "$STATE/kubelet.kubeconfig"
chmod 0644 ca.crt
echo "$stamp" >stamp
