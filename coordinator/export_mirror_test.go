package coordinator

// MirrorMarker is the commit metadata marking a Kafka group's offsets as
// written by the deployment of coordinator id and cluster.
var MirrorMarker = mirrorMarker
